"""Round 148 a: a completed run whose consumer stops reading right after its ReplyEndEvent
keeps its principal's run slot renewed, for as long as the stream object lives.

README "Running many workers": "A slot is held as long as its run or call lasts: every
lease held is renewed four times per `lease_s` ..., so `lease_s` bounds only how long a
crashed worker's slots stay taken"; README "Nothing leaks from a run": "A settled run is
freed at once". The round 147 fix keeps a run's leases renewed while `run.reopen` is set
(`fleet._Holds.renewable`), and the lifecycle sets `run.reopen` at EVERY reply end (not only
one a middleware swallowed), clearing it only in `close`.

Attack: no swallowing middleware at all. A consumer (an SSE handler) reads the reply up to
its `ReplyEndEvent`, sends it and stops reading, keeping the stream object (it would close
it with the connection). The run is settled `completed` (`on_report` called). 5x `lease_s`
later another agent of the same principal asks for a reply under `max_in_flight=1`.
Seen: it is refused (`concurrency_limited`): the completed run's slot is still renewed.
Should: a run whose end reached the caller is over (AgentScope's `_receive_reply_end`
says no round comes after it): its lease is not renewed (it lapsed within `lease_s`
before round 147) and the second run is admitted.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import ReplyEndEvent
from agentscope.message import UserMsg

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio

LEASE_S = 0.2


async def test_a_run_whose_end_was_read_does_not_keep_its_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[
        ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=LEASE_S)]), load_entry_points=False, environ={})
    first = make_agent(ScriptedModel([text("The answer is 42.")]), [search], h.middlewares(), name="first")
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    with h.acting_for(ALICE):
        stream = first.reply_stream(UserMsg("user", "what is the answer?"), yield_final_msg=True)
        async for event in stream:
            if isinstance(event, ReplyEndEvent):
                break  # sent to the client; the stream object is kept until the connection closes
        assert h.last_report(first).terminal_state is TerminalState.COMPLETED
        await asyncio.sleep(5 * LEASE_S)
        await run(other, "find my invoices")
        second = h.last_report(other)
        await stream.aclose()
    assert (second.terminal_state.value, second.reason) == ("completed", "answered"), (
        f"a completed run's slot was still held {5 * LEASE_S}s after its end: "
        f"{second.terminal_state.value} {second.reason}")

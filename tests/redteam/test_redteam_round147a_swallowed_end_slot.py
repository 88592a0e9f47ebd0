"""Round 147 a: between an end a middleware before the harness's swallowed and the
next round's reasoning, the run's provisional report is set (`run.report`), and the
fleet renews no lease of a run whose report is set (`fleet._Holds.renewable`:
`owner.report is not None` -> nothing). A window longer than `lease_s` there (that
middleware's own check before it asks for the round, AgentScope's compression request,
a slow `on_report` sink) lets the run's concurrency slot lapse: another run of the
principal takes it, and the round asked for then runs beside it. Two runs of one
principal in flight under `max_in_flight=1`.

README "Running many workers": "`concurrency_limits` (TTL leases, renewed while held:
runs in flight per principal ...)", "A slot is held as long as its run or call lasts:
every lease held is renewed four times per `lease_s` on a fixed schedule, so `lease_s`
bounds only how long a crashed worker's slots stay taken"; README "Combining": a
middleware that swallows the `ReplyEndEvent` "gets that round under the same run (its
caps, deadline and refusals)".

Attack: a self-check middleware (first) that, on the reply's first end, asks a checker
(1.0 s, 5x `lease_s`=0.2) and then swallows the end for another round, which calls
`slow`. While it checks, a second run of the same principal starts.
Seen: the second run is admitted (`completed`, its search ran) while the first run's
round asked for is still to come (and then runs): the lease lapsed unrenewed.
Should: the second run is refused (`concurrency_limited`): the first run is in flight.
Control: the same wait inside a tool call of the first run (not at a swallowed end) holds.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import ReplyEndEvent
from agentscope.message import HintBlock
from agentscope.middleware import MiddlewareBase

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, slow, text

pytestmark = pytest.mark.asyncio

LEASE_S = 0.2
CHECK_S = 1.0


class SlowSelfCheck(MiddlewareBase):
    """A user's self-check, placed first: on the reply's first end it asks a checker
    service (CHECK_S) and then asks for one more round (swallows the end)."""

    def __init__(self, checking: asyncio.Event) -> None:
        self.swallowed = 0
        self.checking = checking

    async def get_middleware_key(self) -> str:
        return "slow_self_check"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, ReplyEndEvent) and self.swallowed == 0:
                self.swallowed += 1
                self.checking.set()
                await asyncio.sleep(CHECK_S)  # the checker's round trip
                agent.state.append_context(agent.name, [HintBlock(hint="The checker found a gap: check again.")])
                continue
            yield event


async def test_a_swallowed_ends_run_keeps_its_slot_while_the_middleware_checks() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(concurrency_limits=[
        ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=LEASE_S)]), load_entry_points=False, environ={})
    checking = asyncio.Event()
    first = make_agent(ScriptedModel([text("first draft"), calls(("slow", {"seconds": 0.3})), text("checked")]),
                       [slow], [SlowSelfCheck(checking), *h.middlewares()], name="first")
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    with h.acting_for(ALICE):
        task = asyncio.create_task(run(first, "answer and check"))
        await checking.wait()
        await asyncio.sleep(CHECK_S / 2)  # 2.5 lease_s into the check
        await run(other, "find my invoices")
        await task
    second = h.last_report(other)
    assert "slow:end" in RAN  # the round asked for ran
    assert second.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, (
        f"a second run of the principal ran while the first run's swallowed end waited for its round: "
        f"{second.terminal_state.value} {second.reason}, {RAN}")


async def test_control_the_same_wait_inside_the_run_keeps_the_slot() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(concurrency_limits=[
        ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=LEASE_S)]), load_entry_points=False, environ={})
    first = make_agent(ScriptedModel([calls(("slow", {"seconds": CHECK_S})), text("checked")]),
                       [slow], h.middlewares(), name="first")
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    with h.acting_for(ALICE):
        task = asyncio.create_task(run(first, "answer and check"))
        while "slow:start" not in RAN:
            await asyncio.sleep(0.01)
        await asyncio.sleep(CHECK_S / 2)
        await run(other, "find my invoices")
        await task
    second = h.last_report(other)
    assert second.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, second.reason

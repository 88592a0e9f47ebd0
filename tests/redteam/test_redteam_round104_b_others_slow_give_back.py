"""Red team, round 104 (b): one principal's slow give-back stalls another
principal's run, past its deadline, and ends it ``dependency_down``.

Round 101 made ``_take_run_slots`` await ``Fleet._released_here`` (every
background give-back of this worker) before a run slot is taken. Those are
every principal's: Bob's tool call releases its ``search`` slot in the
background on a store that is slow for Bob's keys (1.8 s, under the 2 s
``timeout_s``). Alice's reply starts meanwhile (``deadline_s=0.5``); the store
answers every call of hers at once. Her run open waits the whole 1.8 s for
Bob's give-back (``asyncio.wait`` with no bound), then ends ``dependency_down``
("a service it needs is unavailable") 1.3 s after her deadline, without one
model call. Before round 101 she ran at once.

Real ``Agent``s, real tools in a real (instrumented) ``Toolkit``, one SQLite file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, BOB, RAN, ScriptedModel, calls, drain, make_agent, search, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState
from agentscope_harness.stores import SQLiteStore

BOBS_RELEASE_S = 1.8


class SlowForBob(SQLiteStore):
    """A store whose give-backs of Bob's slots take 1.8 s (within its 2 s timeout)."""

    async def lease_release(self, key: str, lease_id: str, **kw: object) -> None:
        if BOB.user_id in key:
            await asyncio.sleep(BOBS_RELEASE_S)
        await super().lease_release(key, lease_id, **kw)


async def test_another_principals_slow_give_back_does_not_stall_a_run_past_its_deadline(tmp_path: Path) -> None:
    limits = [ConcurrencyLimit(scope="principal", max_in_flight=2),
              ConcurrencyLimit(scope="principal", tool="search", max_in_flight=1)]
    h = Harness(HarnessConfig(store=SlowForBob(str(tmp_path / "fleet.db")), concurrency_limits=limits,
                              deadline_s=0.5), load_entry_points=False, environ={})
    bob = make_agent(ScriptedModel([calls(("search", {"q": "bob's order"})), text("Bob's order is on its way.")]),
                     h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(), name="bob")
    alice = make_agent(ScriptedModel([text("Your order is on its way.")]),
                       h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(), name="alice")

    async def bobs_reply() -> None:
        with h.acting_for(BOB):
            await drain(bob, UserMsg("user", "where is my order?"))

    bobs = asyncio.create_task(bobs_reply())
    while "bob's order" not in RAN:  # Bob's search ran: its slot goes back in the background
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.02)
    started = time.monotonic()
    with h.acting_for(ALICE):
        await drain(alice, UserMsg("user", "where is my order?"))
    took = time.monotonic() - started
    await bobs
    report = h.last_report(alice)
    assert report is not None
    assert (report.terminal_state, report.reason, len(alice.model.calls)) == (
        TerminalState.COMPLETED, "answered", 1), (report.terminal_state.value, report.reason, f"{took:.2f}s")
    assert took < 0.5, f"Alice's reply took {took:.2f} s waiting for Bob's give-back (deadline 0.5 s)"

"""Red team, round 104 (b): a reply refused before it ran anything takes
the human's extension, and the task's next reply starts on a fresh budget.

``CostPolicy(cap_usd=0.010, on_exhausted="ask")`` and
``ConcurrencyLimit(scope="principal", max_in_flight=1)``. Alice's task spends
$0.0096 and parks on its budget question; a human approves $0.002 more
(``harness.extend``). Alice's "go on" arrives while another reply of hers is
in flight: it is refused at open (``concurrency_limited``), runs nothing, yet
its ``budget_router`` claims the parked budget (``claim_parked_budget``), lists
the extension in its report and takes the parked budget out of the state
(``approvals.take``), and with the extension the budget is no longer spent, so
nothing parks it again. Alice's next "go on" finds no parked budget: a fresh
$0.010 task. After the human approved $0.002, the task spent $0.0106 more
(before the park, the same refusal without an extension keeps the parked
budget and asks again).

Real ``Agent``s, real tools in a real (instrumented) ``Toolkit``, one SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, drain, make_agent, search, slow, slow_started, text, tool

from agentscope_harness import ConcurrencyLimit, CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState
from agentscope_harness.stores import SQLiteStore

CAP, MORE = 0.010, 0.002


async def test_a_reply_refused_at_open_does_not_spend_the_humans_extension(tmp_path: Path) -> None:
    h = Harness(HarnessConfig(
        store=SQLiteStore(str(tmp_path / "fleet.db")),
        concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)],
        cost=CostPolicy(cap_usd=CAP, on_exhausted="ask", prices={"scripted": ModelPrice(1.0, 1.0)}),
    ), load_entry_points=False, environ={})
    script = [calls(("search", {"q": "a"}), inp=4000), calls(("search", {"q": "b"}), inp=5600),
              *[calls(("search", {"q": q}), inp=1500) for q in "cdefghijklmnopqrstuvw"], text("done")]
    task = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(),
                      name="research")
    with h.acting_for(ALICE):
        await drain(task, UserMsg("user", "research the market"))
    parked = h.last_report(task)
    assert parked is not None and parked.terminal_state is TerminalState.WAITING_INPUT
    with h.acting_for(ALICE):
        h.extend(task, usd=MORE)  # the human approves $0.002 more

    other = make_agent(ScriptedModel([calls(("slow", {"seconds": 0.4})), text("ok")]),
                       h.instrument(Toolkit(tools=[tool(slow)])), h.middlewares(), name="other")

    async def busy() -> None:
        with h.acting_for(ALICE):
            await drain(other, UserMsg("user", "wait a bit"))

    in_flight = asyncio.create_task(busy())
    await slow_started()
    with h.acting_for(ALICE):
        await drain(task, UserMsg("user", "go on"))  # refused: her other reply holds the slot
    refused = h.last_report(task)
    assert refused is not None and refused.reason == "concurrency_limited"
    await in_flight
    with h.acting_for(ALICE):
        await drain(task, UserMsg("user", "go on"))
    retry = h.last_report(task)
    assert retry is not None

    after_approval = refused.spent_usd + retry.spent_usd
    # what the human approved is what may be spent after the park: the extension
    # and what was left of the cap (plus a call of slack: its usage may pass its estimate)
    assert after_approval <= MORE + (CAP - parked.spent_usd) + 0.002, (
        f"${after_approval:.5f} spent after a ${MORE} approval", refused.extensions, retry.extensions)

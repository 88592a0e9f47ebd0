"""Red team, round 100. ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``, two workers on one SQLite file. On worker A Alice's lead
starts a migrator in the background (a slow tool) and then parks on a
payout's confirmation: ``Fleet.park_run`` sees the migrator in
``live_nested`` and keeps the lead's slot, renewed, for it. Alice's "yes"
reaches worker B (a new Harness and Agent, the state restored): B's resume
takes a slot anew, and the only slot is the one A keeps for this very
lead's own sub-agent. The confirmed payout never runs; the reply ends
``incomplete`` (``concurrency_limited``). Answered on worker A, the same
resume finds the kept slot its own and completes (round 95: a parked run's
resume "takes one again on resume, wherever it lands", never refused by its
own slot)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from background_kit import spawner
from round95_fleet_kit import ACTED, pay_out, store_of
from scripted import ALICE, RAN, ScriptedModel, calls, confirm, drain, make_agent, slow, slow_started, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, ToolPolicy

PAY_OUT = ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                     ask_when=lambda args: "over 50" if args["amount"] > 50 else None)


@pytest.mark.xfail(strict=True, reason=(
    'stated limit (README, Running many workers): a run that parks while a background sub-agent of it still runs keeps its slot on its own worker; answered on another worker before that sub-agent ends, its resume finds the slot taken'
))
async def test_a_park_with_live_background_work_answered_on_another_worker_runs(tmp_path: Path) -> None:
    ACTED.clear()
    make_store = store_of("sqlite", tmp_path)

    def worker() -> Harness:
        config = HarnessConfig(store=make_store(), tools={"pay_out": PAY_OUT},
                               concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)])
        return Harness(config, load_entry_points=False, environ={})

    here = worker()
    child = make_agent(ScriptedModel([calls(("slow", {"seconds": 1.0})), text("migrated")]), [slow],
                       here.middlewares(), name="migrator")
    background: list[asyncio.Task[Any]] = []
    model = ScriptedModel([calls(("spawn", {"task": "migrate"})),
                           calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid 80.")])

    def toolkit(h: Harness) -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(spawner(child, background)), tool(pay_out)]))

    lead = make_agent(model, toolkit(here), here.middlewares(), name="lead")
    try:
        with here.acting_for(ALICE):
            items = await drain(lead, UserMsg("user", "migrate my data, then pay me 80"))
        asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
        await slow_started()

        there = worker()
        lead = make_agent(model, toolkit(there), there.middlewares(), name="lead",
                          state=AgentState.model_validate_json(lead.state.model_dump_json()))
        with there.acting_for(ALICE):
            await drain(lead, confirm(asked, asked.tool_calls[0]))
        assert "slow:end" not in RAN  # the lead's sub-agent still ran on worker A
        report = there.last_report(lead)
        assert report is not None
        assert ACTED == [("pay_out", 80)], (report.terminal_state.value, report.reason)
        assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    finally:
        await asyncio.gather(*background)

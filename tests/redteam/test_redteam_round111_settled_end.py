"""A lead stopped at AgentScope's max_iters (an end the harness decides only
as the lead settles) still binds the payments sub-agent it started in the
background: the end is incomplete, short of the task."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.redteam.payments_kit import RAN, payments_agent
from tests.scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, search, text, tool

pytestmark = pytest.mark.asyncio


async def test_a_background_sub_agent_of_a_lead_stopped_at_max_iters_does_not_pay() -> None:
    RAN.clear()
    tasks: list[asyncio.Task[Any]] = []
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    child_model = SlowModel([calls(("wire_transfer", {"amount": 9000, "payee": "ACME"})), text("Sent.")], delay=0.2)
    payments = payments_agent(h, child_model)

    async def pay(task: str) -> str:
        """Start the payments agent on a payment (it works in the background).

        Args:
            task (str): What to pay.
        """
        tasks.append(asyncio.create_task(payments.reply(UserMsg("lead", task))))
        return "payment started"

    lead = make_agent(
        ScriptedModel([calls(("pay", {"task": "wire $9000 to ACME"})), calls(("search", {"q": "a"})),
                       calls(("search", {"q": "b"})), text("done")]),
        h.instrument(Toolkit(tools=[tool(pay), tool(search)])), h.middlewares(), name="lead", max_iters=2)
    with h.acting_for(ALICE):
        await run(lead, "pay ACME $9000")
        report = h.last_report(lead)
        await asyncio.gather(*tasks)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "max_iters"), report
    child = h.last_report(payments)
    assert "wire:ACME:9000" not in RAN, (RAN, child.terminal_state.value, child.reason)
    assert child.reason == "run_concluded", child.reason

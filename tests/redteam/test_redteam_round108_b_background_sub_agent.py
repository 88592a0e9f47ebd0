"""Round 108 (b): round 107's "a live run's end binds the sub-agents it is
running" lasts only until the lead settles, milliseconds after a stop. A
sub-agent the lead started in a background task (README: one "may outlive"
its lead; its calls listed in ``in_flight`` as side effects that may still
happen) whose model call was in flight when the lead was stopped gets its
answer after the lead settled: ``RunState.enclosing_end`` stops walking at a
settled run ("a settled lead's end is history", meant for a sub-agent
*resumed* after its lead settled), so its ``wire_transfer`` is admitted and
runs after the stop, and its next model call is made; its report says
``completed``.

The same scenario as round 107 (c)'s stopped lead (a payments sub-agent and a
sanctions screen in one batch, an application hook's ``ctx.stop``), with the
sub-agent in the background instead of awaited by the tool.

README "Choices where the design is silent": "A live run's end binds the
sub-agents it is running (a stop, ...): their tool calls are refused
``run_concluded`` and their next model call is not made (they end
``incomplete``, ``run_concluded``). A sub-agent resumed after its lead settled
answers to its own rules." (this one was never parked nor resumed); "Writing a
hook": ``ctx.stop`` ends the run.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.payments_kit import (
    BLOCKED,
    RAN,
    paying_lead,
    payments_agent,
    sanctions_stop,
    screening,
)
from tests.scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

TASKS: list[asyncio.Task] = []


def in_background(payments: Any) -> Callable[..., Any]:
    """The lead's ``pay`` tool: it starts the payments agent in a task of its own and returns."""

    async def pay(task: str) -> str:
        """Start the payments agent on a payment (it works in the background).

        Args:
            task (str): What to pay.
        """
        TASKS.append(asyncio.create_task(payments.reply(UserMsg("lead", task))))
        return "payment started"

    return pay


async def test_a_background_sub_agent_of_a_stopped_lead_still_wires_the_money() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(), hooks=[sanctions_stop], load_entry_points=False, environ={})
    child_model = SlowModel([calls(("wire_transfer", {"amount": 9000, "payee": "ACME"})), text("Sent $9000.")],
                            delay=0.2)
    payments = payments_agent(h, child_model)
    lead = paying_lead(h, in_background(payments), screening(0.05))
    with h.acting_for(ALICE):
        _, final = await run(lead, "pay ACME $9000")
        await asyncio.gather(*TASKS)
    report = h.last_report(lead)
    child = h.last_report(payments)
    assert (report.terminal_state.value, report.reason) == ("failed", "sanctions_hit")
    assert final.get_text_content().startswith(BLOCKED)
    assert RAN[:2] == ["screen:ACME", "stopped"]
    # the break: after the stop, the sub-agent the stopped run started wires the money, calls its model again
    assert "wire:ACME:9000" not in RAN, (RAN, child.terminal_state.value, child.reason, len(child_model.calls))
    assert len(child_model.calls) <= 1 and child.reason == "run_concluded", (len(child_model.calls), child.reason)


@pytest.mark.parametrize("finish", [False, True])
async def test_a_background_sub_agent_of_a_lead_that_completed_goes_on(finish: bool) -> None:
    """A lead that answered (in text, or through its finishing tool) leaves
    the worker it started in the background to its own rules: its payment is
    made after the lead settled (the end that binds is a stop short of the task)."""
    RAN.clear()
    TASKS.clear()
    config = HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")} if finish else {})
    h = Harness(config, load_entry_points=False, environ={})
    child_model = SlowModel([calls(("wire_transfer", {"amount": 90, "payee": "ACME"})), text("Sent $90.")],
                            delay=0.1)
    payments = payments_agent(h, child_model)
    pay = in_background(payments)

    async def submit_answer(answer: str) -> str:
        """Give the user the answer.

        Args:
            answer (str): The answer.
        """
        return answer

    last = calls(("submit_answer", {"answer": "Payment started."})) if finish else text("Payment started.")
    lead = make_agent(ScriptedModel([calls(("pay", {"task": "wire $90 to ACME"})), last]),
                      h.instrument(Toolkit(tools=[tool(pay), tool(submit_answer)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "pay ACME $90")
        assert "wire:ACME:90" not in RAN  # the lead settled first
        await asyncio.gather(*TASKS)
    assert h.last_report(lead).terminal_state.value == "completed"
    child = h.last_report(payments)
    assert RAN == ["wire:ACME:90"] and (child.terminal_state.value, child.reason) == ("completed", "answered")

"""Round 107 (c): a lead stopped by a hook (``ctx.stop``) did not stop the
sub-agent it was running: the sub-agent, nested in the stopped run, went on
making model calls and tool calls, and its payment went out after the stop.
Now a live run's end binds every run nested in it (``RunState.enclosing_end``:
its calls refused ``run_concluded``, its next model call not made).

A payments lead asks its payments sub-agent (same Harness) to wire $9,000
and, in the same parallel batch, screens the payee. The screen comes back
"flagged: sanctions list" and the application's hook stops the run
(``ctx.stop("sanctions_hit", FAILED, text=...)``). From then on every tool
call of the run is refused (README, hook table #5 ``terminal_reached_gate``:
"Once the run is terminal every tool call is refused: run_concluded";
"Writing a hook": ``ctx.stop`` ends the run; ``max_tool_calls`` and the other
caps are "run-wide, sub-agents included"; DESIGN §6.1 "a sub-agent shares its
parent's deadline, cost budget and ledgers and cannot reset them"). The
sub-agent's model answers 0.1 s after the stop, and its ``wire_transfer`` is
judged then, after the stop, and runs; its second model call is made too.

The user is told "This payment is blocked", the report says ``failed``
(``sanctions_hit``), and the same answer lists "pay: Sent $9000." among what
the run found: the money left after the run was stopped.

Cause: ``terminal_reached_gate`` and ``liveness_watchdog`` read only the
calling run's own ``facts.terminal`` (``hooks/termination.py``;
``CallFlow.judge`` in ``calls.py`` likewise); nothing checks whether a run it
is nested in (``RunState.parent``) has concluded, as ``model_calls_spent`` /
``tool_call_cap`` do for the caps.
"""

from __future__ import annotations

import pytest
from agentscope.message import UserMsg

from agentscope_harness import Harness, HarnessConfig
from tests.redteam.payments_kit import (
    BLOCKED,
    RAN,
    paying_lead,
    payments_agent,
    sanctions_stop,
    screening,
)
from tests.scripted import ALICE, SlowModel, calls, run, text

pytestmark = pytest.mark.asyncio


async def test_a_sub_agent_of_a_stopped_run_still_wires_the_money() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(), hooks=[sanctions_stop], load_entry_points=False, environ={})
    child_model = SlowModel([calls(("wire_transfer", {"amount": 9000, "payee": "ACME"})), text("Sent $9000.")],
                            delay=0.1)
    payments = payments_agent(h, child_model)

    async def pay(task: str) -> str:
        """Ask the payments agent.

        Args:
            task (str): What to pay.
        """
        return (await payments.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = paying_lead(h, pay, screening())
    with h.acting_for(ALICE):
        _, final = await run(lead, "pay ACME $9000")
    report = h.last_report(lead)
    assert (report.terminal_state.value, report.reason) == ("failed", "sanctions_hit")
    assert final.get_text_content().startswith(BLOCKED)  # what the user is told
    assert RAN[:2] == ["screen:ACME", "stopped"]  # the run was stopped before the sub-agent acted
    # the break: after the stop, the nested run still calls its model and wires the money
    assert "wire:ACME:9000" not in RAN, (RAN, final.get_text_content())
    assert len(child_model.calls) <= 1, len(child_model.calls)

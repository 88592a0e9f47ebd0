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
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, harness_hook
from tests.scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

RAN: list[str] = []
BLOCKED = "This payment is blocked: the payee is on a sanctions list."


async def wire_transfer(amount: int, payee: str) -> str:
    """Send money.

    Args:
        amount (int): USD.
        payee (str): Who receives it.
    """
    RAN.append(f"wire:{payee}:{amount}")
    return f"sent ${amount} to {payee}"


async def screen_payee(payee: str) -> str:
    """Screen a payee against the sanctions lists.

    Args:
        payee (str): Who.
    """
    RAN.append(f"screen:{payee}")
    return "flagged: sanctions list"


@harness_hook("post_tool_call", priority=40, name="sanctions_stop", kind="observer")
def sanctions_stop(ctx) -> None:
    if ctx.tool.name == "screen_payee" and "flagged" in ctx.result.raw_text:
        RAN.append("stopped")
        ctx.stop("sanctions_hit", TerminalState.FAILED, text=BLOCKED)


async def test_a_sub_agent_of_a_stopped_run_still_wires_the_money() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(), hooks=[sanctions_stop], load_entry_points=False, environ={})
    child_model = SlowModel([calls(("wire_transfer", {"amount": 9000, "payee": "ACME"})), text("Sent $9000.")],
                            delay=0.1)
    payments = make_agent(child_model, h.instrument(Toolkit(tools=[tool(wire_transfer)])), h.middlewares(),
                          name="payments")

    async def pay(task: str) -> str:
        """Ask the payments agent.

        Args:
            task (str): What to pay.
        """
        return (await payments.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(
        ScriptedModel([calls(("pay", {"task": "wire $9000 to ACME"}), ("screen_payee", {"payee": "ACME"})),
                       text("Payment sent.")]),
        h.instrument(Toolkit(tools=[tool(pay), tool(screen_payee)])), h.middlewares(), name="lead",
    )
    with h.acting_for(ALICE):
        _, final = await run(lead, "pay ACME $9000")
    report = h.last_report(lead)
    assert (report.terminal_state.value, report.reason) == ("failed", "sanctions_hit")
    assert final.get_text_content().startswith(BLOCKED)  # what the user is told
    assert RAN[:2] == ["screen:ACME", "stopped"]  # the run was stopped before the sub-agent acted
    # the break: after the stop, the nested run still calls its model and wires the money
    assert "wire:ACME:9000" not in RAN, (RAN, final.get_text_content())
    assert len(child_model.calls) <= 1, len(child_model.calls)

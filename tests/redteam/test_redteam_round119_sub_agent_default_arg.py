"""A sub-agent's call that ran with a declared default does not back the
lead's claim naming that default: the user is told the step did not succeed.

README, `final_answer_audit`: "a claim pattern's named groups name the tool's
arguments ...: then every such claim needs a successful call with those
values (an argument left out counts as the default the tool ran with), a
sub-agent's included"; "What the caller receives": the correction names
"each step that did not succeed".

`refund(order_id, amount=25.0)`. Called by the agent itself with the amount
left out, "Refunded $25 on order o-1." stands (control). Called by a payments
sub-agent (same Harness, nested run), the same call ran the same refund, yet
the lead's identical answer is replaced by "refund (amount 25, order_id o-1)
did not succeed ... Please try again", `incomplete` (`unsupported_claim`).
Cause: calls.CallFlow.shape passes `view.args` (defaults not filled in) to
run_state.RunState.tell_enclosing_runs, so facts.done_otherwise lacks the
default that facts.record_outcome fills in for the run's own successes.
"""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, delegating_tool, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDED: list[tuple[str, float]] = []
CLAIM = r"refunded \$(?P<amount>[\d.]+) on order (?P<order_id>[\w-]+)"
ANSWER = "Refunded $25 on order o-1."


async def refund(order_id: str, amount: float = 25.0) -> str:
    """Refund an order (the standard goodwill amount unless told otherwise).

    Args:
        order_id (str): The order.
        amount (float): How much to refund.
    """
    REFUNDED.append((order_id, amount))
    return f"refund of {amount} on {order_id} issued"


def harness() -> Harness:
    return Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[CLAIM])}),
                   load_entry_points=False, environ={})


async def test_control_the_agents_own_call_with_the_default_backs_the_claim() -> None:
    REFUNDED.clear()
    h = harness()
    agent = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text(ANSWER)]),
                       h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="payments")
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund o-1")
    assert REFUNDED == [("o-1", 25.0)]
    assert final.get_text_content() == ANSWER
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED


async def test_a_sub_agents_call_with_the_default_backs_the_leads_claim() -> None:
    REFUNDED.clear()
    h = harness()
    payments = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text(ANSWER)]),
                          h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="payments")
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund o-1"})), text(ANSWER)]),
                      h.instrument(Toolkit(tools=[tool(delegating_tool(payments))])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        _, final = await run(lead, "refund o-1")
    report = h.last_report(lead)
    assert REFUNDED == [("o-1", 25.0)]  # the very refund the claim names ran, in the nested run
    assert report.children[0].terminal_state is TerminalState.COMPLETED
    # the user is not told that refund did not succeed
    assert final.get_text_content() == ANSWER, final.get_text_content()
    assert (report.terminal_state, report.unsupported_claims) == (TerminalState.COMPLETED, [])

"""A refund a sub-agent made in the lead's earlier reply is reported to the
user as never made.

README "Tells the truth": "an answer claiming an action that never succeeded
is corrected"; the `final_answer_audit` row: a claim stands when its tool
succeeded "in the run, nor in a sub-agent's run nested in it, nor in the
agent's earlier replies"; "What the caller receives": the correction names
"each step that did not succeed".

A lead delegates a refund to a payments sub-agent (same Harness, nested run):
reply 1 refunds o-1 (the tool really ran) and is reported `completed`. On the
user's next message the lead restates "order o-1 has been refunded": the
audit reads only the lead's own context (a `delegate` result) and the new
run's facts, so the user is told "refund (order_id o-1) did not succeed in
this conversation, so that has not been done. Please try again": false, and
an invitation to refund twice. The run is reported `incomplete`
(`unsupported_claim`).
Cause: hooks/safety.py:_audit_claims / _earlier_successes read the agent's
own context only; run_state.tell_enclosing_runs records a sub-run's success
in facts.done_otherwise of the current run, which a new reply starts empty.
"""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, delegating_tool, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDED: list[str] = []
CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?refunded"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDED.append(order_id)
    return f"refund of {order_id} issued"


async def test_a_sub_agents_refund_of_an_earlier_reply_is_not_denied() -> None:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[CLAIM])}),
                load_entry_points=False, environ={})
    payments = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Order o-1 was refunded.")]),
                          h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="payments")
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund o-1"})), text("Order o-1 was refunded."),
                                     text("Yes: order o-1 has been refunded.")]),
                      h.instrument(Toolkit(tools=[tool(delegating_tool(payments))])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        _, first = await run(lead, "refund o-1 please")
        assert h.last_report(lead).terminal_state is TerminalState.COMPLETED
        assert first.get_text_content() == "Order o-1 was refunded."
        _, second = await run(lead, "so was it refunded?")
    assert REFUNDED == ["o-1"]  # the refund ran, once
    answer = second.get_text_content() or ""
    report = h.last_report(lead)
    # the user is not told that a refund which ran did not succeed (and to try again)
    assert "did not succeed" not in answer, answer
    assert (report.terminal_state, report.unsupported_claims) == (TerminalState.COMPLETED, [])

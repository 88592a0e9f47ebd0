"""Round 109 (a). A park's report names a question nobody was asked.

``refund`` has ``ask_when`` ("refunds over $50 need a human"), and
AgentScope's own permission engine denies it (the application's deny rule:
"refunds are closed today"). The model calls ``refund`` for $80: the call is
denied by AgentScope, never put to a human (the tool adapter returns the
engine's ``DENY``: "a call AgentScope refuses is never put to a human").
The model then calls a client-executed tool (``verify_code``) and the reply
parks on the client's result.

The parked run's report says ``waiting_input`` with the reason "refunds over
$50 need a human" and an ``ask`` decision for ``refund``: an operator (or a
UI reading the report) is told a human must approve a refund, when the only
thing waiting is the client's code check, and the refund was refused.

Cause: ``CallFlow._judge`` (calls.py) records the ``ask`` decision, appends
the question to ``run.park_reason`` and marks the call shown *before*
``HarnessToolAdapter._judged`` asks AgentScope's engine; on the engine's
``DENY`` nothing is taken back, and ``ReplyLifecycle.park`` reports
``run.park_reason`` for whatever parks later in the run.

README ("Ask a human"): "parks the call through AgentScope's own confirmation
flow (``RequireUserConfirmEvent``); the run reports ``waiting_input`` with
that reason"; "A call a gate refuses is never asked about"."""

from __future__ import annotations

import pytest
from agentscope.event import RequireExternalExecutionEvent, RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, client_tool, drain, make_agent, text, tool_messages

pytestmark = pytest.mark.asyncio

ALICE = Principal(user_id="alice", tenant="acme")
QUESTION = "refunds over $50 need a human"
RAN: list[str] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


async def test_a_park_on_a_clients_call_does_not_report_a_refund_question_nobody_was_asked() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", ask_when=lambda a: QUESTION if a["amount"] > 50 else None,
    )}), load_entry_points=False, environ={})
    closed = PermissionDecision(behavior=PermissionBehavior.DENY, message="refunds are closed today")
    model = ScriptedModel([calls(("refund", {"order_id": "o-1", "amount": 80.0})),
                           calls(("verify_code", {"code": "1234"})), text("done")])
    agent = make_agent(model, [FunctionTool(refund, permission=closed), client_tool()], h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "refund o-1 (80 USD), then check my code"))

    # what happened: the refund was denied (never asked), and the reply waits for the client
    assert not any(isinstance(i, RequireUserConfirmEvent) for i in items)
    assert any(isinstance(i, RequireExternalExecutionEvent) for i in items)
    assert RAN == [] and "refunds are closed today" in tool_messages(model.calls[-1])[0]

    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.WAITING_INPUT
    assert QUESTION not in report.reason, report.reason  # nobody is asked about a refund
    assert not [d for d in report.decisions if d.action == "ask" and d.tool == "refund"], report.decisions

"""Round 110: shadow mode's report recorded an ``ask`` decision for a call AgentScope's
engine denied (round 109's fix, enforce mode only).

Round 109 (a): "A call AgentScope's engine denied still named its question
in the parked run's ``waiting_input`` reason, with an ``ask`` decision: a
park's reason and the rule's decision are recorded once the call is put to
a human." In shadow mode, ``CallFlow._judge`` still records the ``ask_when``
decision (``_asked_by_rule``) before ``HarnessToolAdapter._judged`` asks
AgentScope's engine, so a call the engine denies is reported as asked
about. README: shadow mode "the report says what enforcement would have
ended with"; enforcement asks nobody about a call AgentScope denies ("a call
AgentScope refuses is never put to a human")."""

from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, drain, make_agent, text, tool_messages

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


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_denied_call_is_not_reported_asked_about(mode: str) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(mode=mode, tools={"refund": ToolPolicy(
        role="mutation", ask_when=lambda a: QUESTION if a["amount"] > 50 else None,
    )}), load_entry_points=False, environ={})
    closed = PermissionDecision(behavior=PermissionBehavior.DENY, message="refunds are closed today")
    model = ScriptedModel([calls(("refund", {"order_id": "o-1", "amount": 80.0})), text("Refunds are closed.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(refund, permission=closed)])),
                       h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "refund o-1 (80 USD)"))
    assert RAN == [] and "refunds are closed today" in tool_messages(model.calls[-1])[0]
    report = h.last_report(agent)
    asked = [(d.hook, d.action, d.detail) for d in report.decisions if d.action == "ask" and d.tool == "refund"]
    assert not asked, (mode, asked)

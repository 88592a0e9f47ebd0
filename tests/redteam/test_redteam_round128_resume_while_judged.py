"""Round 128 b. A call still being judged when its reply parks is told "not made, call it
again" on a quick resume, and then made anyway: the model calls it again and
the card is charged twice.

README "Security / Every call is gated" (round 127): "A call the run admitted
is made once: one still running when its reply parked (beside a question for a
human or a client-run call in one batch), which AgentScope runs again on the
resume, is refused (`duplicate_call`: made before the reply paused, its result
never reached the conversation; check its effect)". "Tells the truth".

Attack: one model turn calls a client-run tool (`verify_code`) and a
concurrency-safe `charge` whose own permission check takes a moment (a payment
tool asking its provider whether the card may be charged: `check_permissions`
awaits 0.3 s). AgentScope streams the client question first; the reader closes
the stream at it (README: left parked) and the client answers at once (its
code check is instant), while `charge` is still being judged.

What happens: the charge block is still PENDING (no decision yet), so the
resume presents it as a new call; its id is held (being judged) and it is
refused `duplicate_call` with ID_TAKEN: "The call to charge was not made ...
Call it again if you still need it." Then the first judging ends, the call is
admitted and its body runs (in AgentScope's orphaned batch task). The model,
told it was not made, calls it again: the card is charged twice.
Should: a call whose id is being judged or was admitted (``judging`` /
``made``) met again on a resume is not described as not made; it waits for, or
reports, the first one's outcome (or the orphaned first judging is refused
once the reply parked).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import TextBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.tool import FunctionTool, ToolBase, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, drain, make_agent, text, tool_messages

pytestmark = pytest.mark.asyncio

CHARGED: list[tuple[str, int]] = []


async def charge(order_id: str, amount: int) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
        amount (int): USD.
    """
    CHARGED.append((order_id, amount))
    await asyncio.sleep(0.2)
    return f"charged ${amount} for {order_id}"


class CheckedCharge(FunctionTool):
    """The payment tool asks its provider whether the card may be charged."""

    delay = 0.3

    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        await asyncio.sleep(self.delay)
        return ALLOW


class VerifyCode(ToolBase):
    """The client checks a one-time code on the user's device (concurrency safe)."""

    name = "verify_code"
    description = "Check the one-time code on the user's device."
    input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        return ALLOW


@pytest.mark.parametrize("delay", [0.0, 0.3], ids=["control-instant-check", "slow-check"])
async def test_a_charge_judged_across_a_quick_resume_is_told_not_made_then_made(delay: float) -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(tools={"charge": ToolPolicy(role="mutation")}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("charge", {"order_id": "A-1", "amount": 80})),
                           calls(("charge", {"order_id": "A-1", "amount": 80})),  # told: "Call it again"
                           text("Paid."), text("x")])
    checked = CheckedCharge(charge, permission=ALLOW)
    checked.delay = delay
    agent = make_agent(model, h.instrument(Toolkit(tools=[VerifyCode(), checked])), h.middlewares())
    with h.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "pay order A-1"), yield_final_msg=True)
        asked = None
        async for item in stream:
            if isinstance(item, RequireExternalExecutionEvent):
                asked = item
                break
        await stream.aclose()  # README: left parked as at its end
        call = asked.tool_calls[0]
        result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                                 state=ToolResultState.SUCCESS)
        await drain(agent, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    await asyncio.sleep(1.0)  # 3x the check and the charge: any background run of it has ended
    told = [m for m in tool_messages(model.calls[1]) if "code ok" not in m]
    # whatever the model was told is true, and the card is charged once: admitted before the
    # reader left, the charge was made (the resume refuses it as made); judged across that, it
    # was not (Round 129 b: not admitted after the pause), and the model's call again makes it
    assert len(CHARGED) == 1, f"the model read {told}; the card was charged {len(CHARGED)} times: {CHARGED}"

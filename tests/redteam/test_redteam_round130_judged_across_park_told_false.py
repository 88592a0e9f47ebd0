"""Round 130 a. A call refused as "judged across a park" is told a false reason, and
the decision says its resume judges it when nothing ever does.

README "Security / Every call is gated": "A call under an id another call of the
run holds (being judged, admitted, running or parked ...) is refused
(`duplicate_call`...)"; "Tells the truth": a refusal says why. Round 129
(`flow.judged_across_park`): "not made (the reply moved on without it; its resume
judges the call afresh, here or on another worker)", decision detail "judged across
a park: not made (its resume judges it)".

Attack: one model turn calls the client-run `verify_code` and a `charge` whose own
permission check takes 0.3 s (its payment provider). The reader closes the stream
at the client's question (README: left parked as at its end); the client takes
a second to answer (a human typing a code), so the charge's judging ends first.

What happens: the orphaned batch refuses the charge with ID_TAKEN ("another call
of this run has the same id (...)") and AgentScope files that DENIED result in the
context: the resume never judges it (its call has a result). The model reads that
a second call holds the charge's id: there is none (one charge, one id); a model
told another call under its id is in progress may well not charge at all. The
report's decision says "its resume judges it": it never does.
In shadow mode ("decide and record, refuse nothing") the same: the charge a bare
agent makes in its batch (its result then read on the resume) is refused, with the
same false reason.
Should: the text says what happened ("not made: its reply paused while it was
judged; call it again if you still need it"), or the call is left to its resume
(e.g. the harness's own decision held back until the resume re-presents it).
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

CHARGED: list[str] = []


async def charge(order_id: str) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
    """
    CHARGED.append(order_id)
    return f"charged {order_id}"


class CheckedCharge(FunctionTool):
    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        await asyncio.sleep(0.3)  # the payment provider is asked whether the card may be charged
        return ALLOW


class VerifyCode(ToolBase):
    name = "verify_code"
    description = "Check the one-time code on the user's device."
    input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        return ALLOW


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_charge_judged_across_the_park_is_told_another_call_has_its_id(mode: str) -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(mode=mode, tools={"charge": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("charge", {"order_id": "A-1"})),
                           text("Code ok."), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[VerifyCode(), CheckedCharge(charge, permission=ALLOW)])),
                       h.middlewares())
    with h.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "pay order A-1"), yield_final_msg=True)
        asked = None
        async for item in stream:
            if isinstance(item, RequireExternalExecutionEvent):
                asked = item
                break
        await stream.aclose()  # README: left parked as at its end
        await asyncio.sleep(1.0)  # the user types the code (3x the check)
        call = asked.tool_calls[0]
        result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                                 state=ToolResultState.SUCCESS)
        await drain(agent, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    told = [m for m in tool_messages(model.calls[1]) if "charge" in m]
    report = h.last_report(agent)
    said = [d.detail for d in report.decisions if d.code == "duplicate_call"]
    # not made (its reply moved on without it); in shadow mode, which refuses nothing, made as without the harness
    assert CHARGED == ([] if mode == "enforce" else ["A-1"])
    ids = [b.id for m in agent.state.context for b in m.get_content_blocks("tool_call") if b.name == "charge"]
    assert not any("another call of this run has the same id" in m for m in told) and not any(
        "its resume judges it" in d for d in said), (
        f"one charge call under one id ({ids}); the model read {told}; the report says {said}")

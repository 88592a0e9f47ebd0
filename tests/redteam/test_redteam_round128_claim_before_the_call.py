"""Round 128 d (tell the user the truth): "Done: order A-1 was cancelled."
streamed beside a cancel that is then refused is never corrected; the run
ends `completed` with no unsupported claim.

README "What a streaming UI shows tells the same story": "text before a tool
call is shown when the call starts"; "An answer the audit corrects (`claims`)
... is followed in the stream by what replaced it"; "Tells the truth": "an
answer claiming an action that never succeeded is corrected". The brief: the
streamed events and the RunReport agree, and none claims success that did not
happen.

Attack: one model turn is text + a call: "Done: order A-1 was cancelled." and
`cancel_order(A-1)`, which `sequence_gate` refuses (`prerequisite_missing`: no
lookup first). The next turn says only "Anything else I can help with?".

What happened: the stream shows the user "Done: order A-1 was cancelled.
Anything else I can help with?"; the cancel never ran. The audit reads only the
final round's text, so nothing corrects the claim, and the report says
`completed` (`answered`), `unsupported_claims == []`.

Should: text the user was shown in the reply (before a tool call) is audited
for claims like the final answer (at the end of the reply, against the run's
successes), and a correction follows it in the stream, the report saying
`unsupported_claim`.
"""
from __future__ import annotations

import json

import pytest
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, Prerequisite, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

CANCELLED: list[str] = []
CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    CANCELLED.append(order_id)
    return f"order {order_id} cancelled"


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


@pytest.mark.xfail(strict=True, reason="README limit: the claims audit reads the answer, not text streamed "
                   "beside a tool call in an earlier round")
async def test_a_claim_streamed_beside_a_refused_call_is_corrected() -> None:
    CANCELLED.clear()
    h = Harness(HarnessConfig(tools={
        "lookup_order": ToolPolicy(role="lookup"),
        "cancel_order": ToolPolicy(role="mutation", claims=[CLAIM],
                                   requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])]),
    }), load_entry_points=False, environ={})
    says_done_and_calls = ChatResponse(
        content=[TextBlock(text="Done: order A-1 was cancelled."),
                 ToolCallBlock(id="c1", name="cancel_order", input=json.dumps({"order_id": "A-1"}))],
        is_last=True, usage=ChatUsage(input_tokens=10, output_tokens=10, time=0.0))
    model = ScriptedModel([says_done_and_calls, text("Anything else I can help with?")], stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order), tool(lookup_order)])),
                       middlewares=h.middlewares())
    with h.acting_for(ALICE):
        events, final = await run(agent, "cancel my order A-1")
    report = h.last_report(agent)
    shown = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))

    assert CANCELLED == [] and report.refusals == {"prerequisite_missing": 1}  # nothing was cancelled
    assert "order A-1 was cancelled" in shown  # ... but the user was shown it was
    # the made-up cancel is corrected, in the stream and in the report
    assert "has not been done" in shown, shown
    assert report.unsupported_claims == ["cancel_order"], (report.terminal_state, report.reason)

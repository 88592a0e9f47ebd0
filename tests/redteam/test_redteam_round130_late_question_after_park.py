"""Round 130 a. A sibling whose question comes after its reply parked (a slow async
`ask_when`, or the tool's own permission check asking late) is parked in the
orphaned batch: the human is never shown it, the confirmation they do send
resumes nothing for it, and the reply parks again with no question.

README "Ask a human": "A reader that stops at the question (...) and closes or drops
the stream leaves the reply parked as at its end"; "The question is the
`RequireUserConfirmEvent` that `agent.reply_stream(...)` yields: its `reply_id` and
`tool_calls` are what you answer." Round 129 (`RunState.pauses`): "a call whose
judgement began before a pause is not admitted after it (its reply moved on without
it; the resume ... judges it afresh)".

Attack: one model turn calls `note` (ask_when: instant) and `refund` (ask_when: an
async rule that asks the refund service, 0.3 s, then says "refunds need a human").
AgentScope streams `note`'s question; the reader closes the stream at it (parked as
at its end, report `waiting_input` naming the note only). 0.3 s later the orphaned
batch's `refund` judging ends with a question: `_judged` has the pause check on the
ALLOW path only, so the ASK path parks it (`flow.parks`, `_waits`) after the park and
AgentScope marks it ASKING. The human confirms the one question they were shown.

What happens: the resume runs `note`; `refund` is left ASKING, so AgentScope exits
parked again ("I'm waiting for your permission ...") without yielding any
`RequireUserConfirmEvent`: the user has nothing to answer, the refund is never asked
about, never made, and the model is never told. Control (the same reader reading
to the stream's end): both questions are shown at the park, confirmed, and the
refund runs once. (With an instant rule the second question is queued behind the
first and lost the same way; with the slow one the reader cannot tell: nothing
follows the first question for 0.3 s.)
Should: a question reached after a pause is not parked (the same pause check as an
admission: its resume judges it afresh, where it is asked, or told "not made").
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

REFUNDED: list[str] = []


async def note(text_: str) -> str:
    """Write a note on the order.

    Args:
        text_ (str): The note.
    """
    return "noted"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDED.append(order_id)
    return f"refunded {order_id}"


def _refund_rule(delay: float):
    async def rule(args: dict) -> str:
        await asyncio.sleep(delay)  # the refund service says whether a human must approve
        return "refunds need a human"
    return rule


@pytest.mark.parametrize("closes,reads_for", [(False, 1.0), (True, 1.0), (True, 0.0)],
                         ids=["control-reads-to-the-end", "closes-at-the-question", "closes-and-answers-at-once"])
async def test_a_question_reached_after_the_park_is_never_shown(closes: bool, reads_for: float) -> None:
    delay = 0.3
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={"note": ToolPolicy(ask_when=lambda a: "notes need a human"),
                                     "refund": ToolPolicy(role="mutation", ask_when=_refund_rule(delay))}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("note", {"text_": "vip"}), ("refund", {"order_id": "A-1"})),
                           text("Noted and refunded."), text("x"), text("y")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(note), tool(refund)])), h.middlewares())
    shown: list[str] = []
    with h.acting_for(ALICE):
        inputs = UserMsg("user", "note vip and refund A-1")
        for _ in range(3):  # the user answers every question they are shown, each as soon as it is shown
            stream = agent.reply_stream(inputs, yield_final_msg=True)
            asked = None
            async for item in stream:
                if isinstance(item, RequireUserConfirmEvent):
                    asked = item if asked is None else asked.model_copy(
                        update={"tool_calls": [*asked.tool_calls, *item.tool_calls]})
                    if closes:
                        break
            await stream.aclose()  # README: left parked as at its end
            if asked is None:
                break
            shown += [c.name for c in asked.tool_calls]
            await asyncio.sleep(reads_for)  # the human reads it (3x the rule: the batch's judging is over), or not
            inputs = UserConfirmResultEvent(reply_id=asked.reply_id, confirm_results=[
                ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls])
    await asyncio.sleep(1.0)  # 3x the rule: any judging left has ended
    report = h.last_report(agent)
    told = list(tool_messages(model.calls[-1])) if len(model.calls) > 1 else []
    assert "refund" in shown or REFUNDED or any("refund" in m for m in told), (
        f"the user was shown {shown}; the refund ran {len(REFUNDED)} times; the model made "
        f"{len(model.calls)} calls and read {told}; the run ends {report.terminal_state.value} ({report.reason})")
    assert len(REFUNDED) <= 1
    assert report.terminal_state.value == "completed", (
        f"the user was shown {shown}; the refund ran {len(REFUNDED)} times; the model made {len(model.calls)} "
        f"calls; the reply ends {report.terminal_state.value} ({report.reason}) with no question left to answer")

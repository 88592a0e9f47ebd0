"""Round 131 a. A reader that closes the stream at a run's SECOND question and whose
human answers at once has the answer refused as "answers another park than the one
waiting": the approved refund is never made and the user gets the fallback.

README "Ask a human": "A reader that stops at the question (`RequireUserConfirmEvent`
or `RequireExternalExecutionEvent`, the last item AgentScope streams before it waits)
and closes or drops the stream leaves the reply parked as at its end". Round 130
(`ReplyLifecycle.serial`, `RunState.replied_by`): the closed reply's own close, which
AgentScope runs late (in a task), "does nothing once a later reply resumed its run".

Attack: refunds need a human (`ask_when`). Reply 1 asks about refund A-1 and ends
parked (read to its end). The human approves; the resumed reply asks about refund B-2;
the reader closes the stream at that question (`await stream.aclose()`), and the
human's approval of B-2 is sent at once (a UI that answers as soon as it is clicked).

What happens: the resume of B-2 starts before the closed reply's close ran, so the run
still names its first park as the one waiting (`park_awaiting` = A-1's call); the
B-2 approval "answers another park than the one waiting": the run acts for nobody,
ends `incomplete` `refused:permission_denied`, B-2 is never refunded and the user reads
the fallback. The late close then does nothing (replied_by). Control: the same approval
sent 0.3 s later (after the close ran) refunds B-2 and completes.
Should: the reply's park at a question is taken when the question is streamed (or
before `aclose()` returns), so that an answer sent at once resumes it as at its end.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text, tool, until_question

pytestmark = pytest.mark.asyncio

REFUNDED: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDED.append(order_id)
    return f"refunded {order_id}"


@pytest.mark.parametrize("answers_after", [
    pytest.param(0.3, id="control-answers-later"),
    pytest.param(0.0, id="answers-at-once", marks=pytest.mark.xfail(
        strict=True, reason="README limit: a second question closed and answered before AgentScope closes the "
        "reply's layers acts for nobody")),
])
async def test_second_question_closed_and_answered_at_once_is_refused(answers_after: float) -> None:
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", ask_when=lambda a: "refunds need a human")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("refund", {"order_id": "B-2"})),
                           text("Both orders are refunded."), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "refund A-1 and B-2"))
        first = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
        second = await until_question(agent, confirm(first, first.tool_calls[0]), RequireUserConfirmEvent)
        await asyncio.sleep(answers_after)
        out = await drain(agent, confirm(second, second.tool_calls[0]))
    await asyncio.sleep(0.5)
    said = [m.get_text_content() for m in out if isinstance(m, Msg)]
    report = h.last_report(agent)
    assert REFUNDED == ["A-1", "B-2"] and report.terminal_state is TerminalState.COMPLETED, (
        f"both refunds approved: made {REFUNDED}; the user read {said}; the run ends "
        f"{report.terminal_state.value} {report.reason} "
        f"{[d.detail for d in report.decisions if d.code == 'permission_denied']}")

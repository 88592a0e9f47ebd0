"""Round 130 a. The reader's close at the question is carried out by the harness only
after `aclose()` has returned (AgentScope's nested reply generators are closed by
their finalizers, in tasks of their own): a client that answers at once resumes the
reply first, and the late close then counts a "pause" inside the resumed reply: its
new, legitimate call being judged is refused as "judged across a park", with a
false reason.

README "Ask a human": "A reader that stops at the question (`RequireUserConfirmEvent`
or `RequireExternalExecutionEvent`, the last item AgentScope streams before it waits)
and closes or drops the stream leaves the reply parked as at its end". Round 129
(`RunState.pauses`, lifecycle `close`): the pause is counted "when its reader closes
the stream at a question", so that "a call whose judgement began before a pause is
not admitted after it". README "Security": a refusal tells the model why.

Attack: one model turn calls the client-run `verify_code` only. The reader closes the
stream at its question (`await stream.aclose()`), and the client answers at once (an
automated code check on the same worker). The resumed reply's model asks for
`lookup`, whose own permission check asks the order service (0.2 s).

What happens: `aclose()` returns before the harness's `close` runs; the resume
starts (its `rejoin` counts a pause), the model calls `lookup`, and while it is
being judged the old stream's `close` finally runs: it counts another pause (and,
AgentScope no longer waiting, writes a park record for the live run), so `lookup` is
refused `duplicate_call`: "The call to lookup was not made: another call of this run
has the same id ... Call it again" (decision: "judged across a park"). No other call
has its id, nothing paused it, and the lookup is never made; the model is told a
falsehood. Control (the client answers 0.2 s later, after the close ran): the
lookup runs once.
Should: the reply's close at the question is done before `aclose()` returns (close
the chain's inner generators explicitly), or a close that finds its run resumed by
another reply (a later lifecycle owns it) leaves it alone.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState
from tests.redteam.park_kit import checked, told
from tests.scripted import (
    ALICE,
    ScriptedModel,
    calls,
    client_result,
    client_tool,
    drain,
    make_agent,
    text,
    until_question,
)

pytestmark = pytest.mark.asyncio

LOOKED: list[str] = []


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    LOOKED.append(order_id)
    return f"order {order_id}: paid"


@pytest.mark.parametrize("answers_after", [0.2, 0.0], ids=["control-answers-later", "answers-at-once"])
async def test_a_quick_answer_has_its_resumed_call_refused_by_the_late_close(answers_after: float) -> None:
    LOOKED.clear()
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"})), calls(("lookup", {"order_id": "A-1"})),
                           text("Your code is fine and order A-1 is paid."), text("x")])
    # the order service is asked for 0.2 s whether the caller may see it
    toolkit = h.instrument(Toolkit(tools=[client_tool(), checked(lookup, 0.2)]))
    agent = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "check my order A-1"))
        await asyncio.sleep(answers_after)
        await drain(agent, client_result(asked))
    await asyncio.sleep(0.6)
    report = h.last_report(agent)
    refused = [d.detail for d in report.decisions if d.action == "refuse"]
    assert LOOKED == ["A-1"] and not refused, (
        f"one lookup by the model in the resumed reply: made {len(LOOKED)} times; the model read {told(model)}; "
        f"refusals {refused}; the run ends {report.terminal_state.value}")
    assert report.terminal_state is TerminalState.COMPLETED

"""Red team, round 104 (a). A structured reply whose finishing tool's answer
claims an action that never happened ("order A-1 was cancelled", no
cancel_order call) ends ``completed`` (``finished``) once the model gives the
structured output in the narrowed round: the finishing tool's answer is
dropped for AgentScope's canned line and never audited. The same run without
the output ends ``incomplete`` (``unsupported_claim``) with a correction.
README: "a run ends ``completed`` only when its delivery contract holds";
"What the caller receives": an answer that "claims an action whose tool never
succeeded in the run" -> ``incomplete`` (``unsupported_claim``)."""

from __future__ import annotations

from agentscope.message import UserMsg
from orders_kit import finishing_shop
from scripted import ALICE, Ids, ScriptedModel, calls, make_agent


async def test_a_structured_reply_whose_finishing_answer_claims_a_cancel_never_made_is_not_completed() -> None:
    harness, toolkit = finishing_shop()
    model = ScriptedModel([calls(("submit_answer", {"answer": "Your order A-1 was cancelled."})),
                           calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))])
    agent = make_agent(model, toolkit, middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        await agent.reply(UserMsg("user", "cancel order A-1"), structured_schema=Ids)
    report = harness.last_report(agent)

    assert report.tool_calls.get("cancel_order", 0) == 0  # nothing was cancelled
    # the finishing tool's answer claims the cancel: the run's delivery contract does not hold
    assert (report.terminal_state.value, report.reason) == ("incomplete", "unsupported_claim"), (
        report.terminal_state.value, report.reason)

"""Red team, round 104 (a). A structured reply whose finishing tool completed
and whose output the model then gives (in the narrowed round the harness
grants): the user's final text is AgentScope's canned line "The required
structured output is generated.", not the finishing tool's answer. README
("What the caller receives"): the finishing tool succeeded -> ``completed``
(``finished``) -> "the finishing tool's answer"; liveness_watchdog: "A run
whose finishing tool completed ends with that tool's answer ... (a structured
reply first gets its two rounds narrowed to the output ...)". Without the
output the same run does end with the tool's answer (structured_output_missing),
so giving the output loses the verified answer."""

from __future__ import annotations

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, Ids, ScriptedModel, calls, make_agent, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

ANSWER = "Keep orders A-1 and A-7; drop the rest."


async def submit_answer(answer: str) -> str:
    """Submit the final answer.

    Args:
        answer (str): The answer for the user.
    """
    return "submitted"


async def test_a_structured_reply_finished_by_its_finishing_tool_ends_with_that_tools_answer() -> None:
    harness = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}), load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[tool(submit_answer)]))
    model = ScriptedModel([calls(("submit_answer", {"answer": ANSWER})),
                           calls(("GenerateStructuredOutput", {"ids": ["A-1", "A-7"]}))])
    agent = make_agent(model, toolkit, middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        final = await agent.reply(UserMsg("user", "which orders should I keep?"), structured_schema=Ids)
    report = harness.last_report(agent)

    assert (report.terminal_state.value, report.reason) == ("completed", "finished")
    assert final.structured_output == {"ids": ["A-1", "A-7"]}
    # README: the finishing tool succeeded -> the final Msg is "the finishing tool's answer"
    assert final.get_text_content() == ANSWER, final.get_text_content()


async def test_the_answer_streams_once_and_a_stopped_structured_reply_ends_with_its_stop_text() -> None:
    """The same answer reaches the stream (once, as a text block: the
    narrowed round showed the output's call, never the answer); and a
    structured reply stopped at ``max_model_calls`` whose narrowed round
    gives the output ends with the fallback (what the README's table says a
    stop receives), the output kept, not AgentScope's line."""
    from agentscope.event import TextBlockDeltaEvent
    from agentscope.message import Msg

    harness = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}), load_entry_points=False)
    model = ScriptedModel([calls(("submit_answer", {"answer": ANSWER})),
                           calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(submit_answer)])),
                       middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        events = [e async for e in agent.reply_stream(UserMsg("user", "which orders?"), structured_schema=Ids)
                  if not isinstance(e, Msg)]
    assert "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent)) == ANSWER

    stopped = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    model = ScriptedModel([calls(("submit_answer", {"answer": "x"})),
                           calls(("GenerateStructuredOutput", {"ids": ["A-9"]}))])
    agent = make_agent(model, stopped.instrument(Toolkit(tools=[tool(submit_answer)])),
                       middlewares=stopped.middlewares())
    with stopped.acting_for(ALICE):
        final = await agent.reply(UserMsg("user", "which orders?"), structured_schema=Ids)
    report = stopped.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "max_model_calls")
    assert final.structured_output == {"ids": ["A-9"]}
    text = final.get_text_content() or ""
    assert "structured output is generated" not in text and text.startswith("I could not complete"), text

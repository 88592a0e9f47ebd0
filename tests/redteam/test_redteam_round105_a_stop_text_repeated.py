"""Red team, round 105 (a). A structured reply stopped on its budget question
(``CostPolicy(on_exhausted="ask")``) gets its two narrowed rounds for the
output; the model guard refuses each narrowed call (it would overspend too)
and answers it with the stop text as the model's final response. AgentScope
loops (the output is still owed), the next round does the same, and the
third ends with ``_answer``: the user is asked the budget question three
times in the stream, and the agent's context keeps it three times (what the
model reads next turn). The same with a deadline that cuts the narrowed
round (the finishing tool's answer, or the fallback, twice), and with any
structured reply whose model call the deadline cuts.

README: "What a streaming UI shows tells the same story"; the final Msg says
the question once. Table ("What the caller receives"): parked on a budget
question -> ``waiting_input`` -> "the budget question". Cause:
``model_guard`` answers a refused or cut call with ``_final(stop text)``
(model_guard.py:385, :391, :399, ``_deadline_passed``); ``agent_adapter.on_reasoning``
streams that Msg as an answer in a round that owes the output, and the next
round (``_structured_conclusion`` / ``_answer``) says it again.

Real ``Agent``, a real tool in a real (instrumented) ``Toolkit``."""

from __future__ import annotations

from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, Ids, ScriptedModel, calls, make_agent, search, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState


async def test_a_budget_question_of_a_structured_reply_is_asked_once() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.010, on_exhausted="ask",
                                              prices={"scripted": ModelPrice(1.0, 1.0)})),
                load_entry_points=False, environ={})
    script = [calls(("search", {"q": "a"}), inp=4000), calls(("search", {"q": "b"}), inp=5600),
              calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))]
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    streamed, final = "", None
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "research"), structured_schema=Ids,
                                             yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            elif isinstance(item, TextBlockDeltaEvent):
                streamed += item.delta
    report = h.last_report(agent)
    assert report is not None and report.terminal_state is TerminalState.WAITING_INPUT
    question = final.get_text_content() or ""
    assert question.startswith("This task's next step would go past its budget"), question

    stored = [b.text for m in agent.state.context if not isinstance(m.content, str)
              for b in m.content if getattr(b, "type", None) == "text" and b.text == question]
    # asked once: in the stream, and in what the model reads next turn
    assert (streamed.count(question), len(stored)) == (1, 1), (streamed.count(question), len(stored))

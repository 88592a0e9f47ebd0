"""Red team, round 106 (a). A structured reply: the model answers a round in
text ("I found order A-1 for you.", streamed live, as a bare agent streams
it) and a ``post_reflect`` hook stops the run on that answer, ``completed``,
with its own text. The narrowed round gives the output; the reply's text is
the stop's. The model's answer the user was shown is then taken out of the
agent's context: the model never reads, in the narrowed round or next turn,
what it told the user (at 5386ff2 it was kept).

README ("The hooks"): "at ``post_reflect`` on the model's final answer ...
one that completes the run or leaves it waiting lets the answer stand"; the
same reply without ``structured_schema`` keeps it in the context. Round 105
(CHANGELOG): "a stop's text answered in a structured reply's call is neither
shown nor kept" -- the harness's words in the model's place, not the
model's own. Cause: ``agent_adapter.on_reasoning`` (line 219) calls
``_forget_said`` whenever a round owing the output ends with
``run.facts.terminal`` set, a stop a hook made after the model answered
included: ``held`` is then the model's own answer, and its text is removed.

Real ``Agent``, a real tool in a real (instrumented) ``Toolkit``."""

from __future__ import annotations

from agentscope.tool import Toolkit
from orders_kit import structured_reply
from scripted import ALICE, ScriptedModel, calls, make_agent, search, text, tool

from agentscope_harness import Harness, HarnessConfig, ReflectContext, TerminalState, harness_hook

SAID = "I found order A-1 for you."


@harness_hook("post_reflect", priority=50, name="enough", kind="safety")
def enough(ctx: ReflectContext) -> None:
    if SAID in (ctx.model_output.text or ""):
        ctx.stop("enough found", TerminalState.COMPLETED, text="That is all for now.")


async def test_a_structured_replys_shown_answer_stays_in_the_context() -> None:
    h = Harness(HarnessConfig(), hooks=[enough], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "orders"})), text(SAID),
                           calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        streamed, final = await structured_reply(agent, "which orders?")
    assert final is not None and final.structured_output == {"ids": ["A-1"]}
    assert SAID in streamed  # the user was shown the model's answer, live

    stored = [b.text for m in agent.state.context if not isinstance(m.content, str)
              for b in m.content if getattr(b, "type", None) == "text"]
    # what the model reads next turn holds what it told the user
    assert SAID in stored, stored

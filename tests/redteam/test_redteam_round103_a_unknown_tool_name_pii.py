"""Red team, round 103 (a): a tool name is the model's to write. Round 102
rewrites AgentScope's answer to a call no gate judged with ``quoted_pii``
in the user's stream, an unknown tool's too (``ToolNotFoundError: The tool
named '[pii:email]' doesn't exist.``), but the very name it quotes streams
whole two events earlier: ``ToolCallStartEvent.tool_call_name`` and
``ToolResultStartEvent.tool_call_name`` go through ``outputs.shown_name``,
which redacts secrets only. A model told (by an injected page) to put an
email it read into a call gets it to the user's screen by calling a tool
named after it. README: ``HarnessConfig.pii`` rewrites "the model's
streamed text, thinking and tool-call arguments, every call's"; the name
is streamed text the model wrote (the Secrets list names it: "the tool names
in streamed call and result events (the model writes the name too)").

Real ``Agent``, a real tool in a real ``Toolkit``."""

from __future__ import annotations

from agentscope.event import ToolCallStartEvent, ToolResultStartEvent, ToolResultTextDeltaEvent
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

EMAIL = "bob.smith@example.com"


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): The query.
    """
    return "nothing"


async def test_an_email_the_model_writes_as_a_tool_name_never_streams() -> None:
    h = Harness(HarnessConfig(pii={"email": "redact"}), load_entry_points=False, environ={})
    model = ScriptedModel([calls((EMAIL, {"q": "a"})), text("Sorry.")], stream=True)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "look it up")
    said = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert "ToolNotFoundError" in said and EMAIL not in said  # AgentScope's text quoting the name: rewritten
    names = [e.tool_call_name for e in events if isinstance(e, (ToolCallStartEvent, ToolResultStartEvent))]
    assert names and not any(EMAIL in n for n in names), f"the tool name streamed the email: {names}"

"""Round 161 a (a user's scenarios on "Combining with AgentScope's built-in
middlewares"): "One harness's middlewares added twice to an agent (...; the
tool adapter alone twice too) fail its first reply with
``HarnessConfigError`` naming the agent". The tool adapter alone twice was
checked only where it judged a call: a first reply answering in text passed,
and one calling a tool raised AgentScope's ``ExceptionGroup`` around the
error (its tool runner), which ``except HarnessConfigError`` misses."""

from __future__ import annotations

import pytest
from scripted import RAN, ScriptedModel, calls, make_agent, run, search, text

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError


async def test_the_tool_adapter_twice_fails_a_first_reply_answering_in_text() -> None:
    """(A first reply calling a tool: round 143 a's test.)"""
    tool_adapter = Harness(HarnessConfig()).middlewares()[1]
    model = ScriptedModel([text("hi")])
    agent = make_agent(model, [search], middlewares=[tool_adapter, tool_adapter], name="tool_twice")
    with pytest.raises(HarnessConfigError, match="'tool_twice'.*added 2 times"):
        await run(agent)
    assert model.calls == []  # failed before its first model call


async def test_the_tool_adapter_once_alone_still_answers() -> None:
    model = ScriptedModel([calls(("search", {"q": "a"})), text("done")])
    agent = make_agent(model, [search], middlewares=[Harness(HarnessConfig()).middlewares()[1]])
    assert (await run(agent))[1].get_text_content() == "done"
    assert RAN == ["a"]

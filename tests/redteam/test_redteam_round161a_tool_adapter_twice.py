"""Round 161 a (a user's scenarios on "Combining with AgentScope's built-in
middlewares"): "One harness's middlewares added twice to an agent (...; the
tool adapter alone twice too) fail its first reply with
``HarnessConfigError`` naming the agent". The tool adapter alone twice was
checked only where it judged a call: a first reply answering in text passed,
and one calling a tool raised AgentScope's ``ExceptionGroup`` around the
error (its tool runner), which ``except HarnessConfigError`` misses."""

from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from scripted import (
    RAN,
    ScriptedModel,
    calls,
    client_result,
    client_tool,
    make_agent,
    run,
    search,
    text,
    tool,
    until_question,
)

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


async def test_the_tool_adapter_twice_fails_a_reply_resumed_while_another_agents_run_is_open() -> None:
    """Round 163 a: checked only for a reply with no run open, the tool adapter
    twice passed on an agent rebuilt from a parked agent's state (AgentScope
    keeps a resumed reply's id, and the parked agent's run was still open)."""
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    parked = make_agent(ScriptedModel([calls(("verify_code", {"code": "1"})), text("x")]),
                        h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    asked = await until_question(parked, UserMsg("user", "hi"))
    assert parked.state.reply_id in h.table.slots
    tool_adapter = h.middlewares()[1]
    model = ScriptedModel([calls(("search", {"q": "a"})), text("done")])
    rebuilt = make_agent(model, h.instrument(Toolkit(tools=[client_tool(), tool(search)])),
                         [tool_adapter, tool_adapter], state=AgentState.model_validate(parked.state.model_dump()))
    with pytest.raises(HarnessConfigError, match="'shop'.*added 2 times"):
        await run(rebuilt, inputs=client_result(asked))
    assert model.calls == [] and RAN == []

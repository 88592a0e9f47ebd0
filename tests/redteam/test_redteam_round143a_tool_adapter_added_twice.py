"""Round 143 a: `_added_once` counts the harness's layers among the agent's REPLY
middlewares only. The tool adapter added twice (an agent factory added
`harness.middlewares()`, the app adds the tool adapter again; or the tool adapter alone,
twice) is not detected: the first layer judges and admits the call, the second meets
its id held and refuses it as a duplicate, and the first's `on_acting` takes the
admission so the second says "not judged". Every tool call of every reply is refused
with a misleading text, and the report says `completed` (`answered`).

README "Combining": "One harness's middlewares added twice to an agent (a factory added
them already) fail its first reply with `HarnessConfigError` naming the agent: each
layer would open a run of its own."

Attack: `middlewares=[*h.middlewares(), h.middlewares()[1]]`, and the tool adapter alone
twice. Seen: no HarnessConfigError; the model reads "[harness:duplicate_call] The call
to search was not made: another call of this run has the same id"; `search` never runs.
Should: the reply fails with `HarnessConfigError` naming the agent, as for the agent
adapter added twice.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError
from tests.scripted import ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("shape", ["both_then_the_tool_adapter", "the_tool_adapter_alone_twice"])
async def test_the_tool_adapter_added_twice_is_refused_naming_the_agent(shape: str) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    both = h.middlewares()
    again = h.middlewares()[1]
    layers = [*both, again] if shape == "both_then_the_tool_adapter" else [both[1], again]
    model = ScriptedModel([calls(("search", {"q": "a"})), text("done")])
    agent = make_agent(model, [search], layers)
    # with the agent adapter the reply fails at its start; the tool adapter alone at its first
    # model call (round 161 a: no longer in AgentScope's task of a tool call, an ExceptionGroup)
    with pytest.raises(HarnessConfigError, match="shop"):
        await run(agent, "research this")
    assert model.calls == []

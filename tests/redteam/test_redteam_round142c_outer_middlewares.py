"""Round 142 c (scenarios: combining with AgentScope's middlewares). README
"Combining with AgentScope's built-in middlewares": "put your own middlewares first
and the harness's two last, `middlewares=[*mine, *harness.middlewares()]`".
DESIGN §4.1: one owner per guarantee ("what the user sees: one output path for
text ..."; "the same shaping for results that enter otherwise"; "a run's life: open,
context vars, settle, report").

- The harness's middlewares added twice (an agent factory adds them, the app appends
  them again): the reply stopped after its start, no model call, and the report said
  `completed` (`answered`) with 0 model calls.
"""
from __future__ import annotations

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError
from tests.scripted import ScriptedModel, search, text, tool

pytestmark = pytest.mark.asyncio


async def test_the_harness_added_twice_is_refused_naming_it() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    toolkit = h.instrument(Toolkit(tools=[tool(search)]))
    agent = Agent(name="shop", system_prompt="s", model=ScriptedModel([text("hello")]), toolkit=toolkit,
                  middlewares=[*h.middlewares(), *h.middlewares()],
                  injection_config=InjectionConfig(inject_runtime_state=False))
    with pytest.raises(HarnessConfigError, match="added 2 times"):
        await agent.reply(UserMsg("user", "hi"))
    assert h.last_report(agent) is None  # no run was opened: no report says it completed

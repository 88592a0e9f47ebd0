"""Red team, round 88 (transparency). Finding 1: a tool result's DataBlocks (an image the tool returns) never reach
the caller's stream under a default Harness: AgentScope streams them as
ToolResultDataDeltaEvent; the harnessed agent streams only the text."""
import asyncio

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.event import ToolResultDataDeltaEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, URLSource, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel, calls, text

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")


async def chart(q: str) -> ToolChunk:
    """Draw a chart.

    Args:
        q (str): What to draw.
    """
    return ToolChunk(content=[TextBlock(text="here is the chart"),
                              DataBlock(source=Base64Source(data="iVBORw0KGgo=", media_type="image/png"), name="chart.png")],
                     state="success")


async def photo(q: str) -> ToolChunk:
    """A photo by URL.

    Args:
        q (str): Which.
    """
    return ToolChunk(content=[DataBlock(source=URLSource(url="https://example.com/a.png", media_type="image/png"))],
                     state="success")


async def _data_events(harnessed: bool, tool_name: str, stream: bool) -> list[tuple]:
    toolkit = Toolkit(tools=[FunctionTool(chart, permission=ALLOW), FunctionTool(photo, permission=ALLOW)])
    mws = []
    if harnessed:
        h = Harness(HarnessConfig())
        toolkit = h.instrument(toolkit)
        mws = h.middlewares()
    model = ScriptedModel([calls((tool_name, {"q": "x"})), text("Done.")], stream=stream)
    agent = Agent(name="a", system_prompt="s", model=model, toolkit=toolkit, middlewares=mws,
                  injection_config=InjectionConfig(inject_runtime_state=False))
    out = []
    async for ev in agent.reply_stream(UserMsg("user", "go")):
        if isinstance(ev, ToolResultDataDeltaEvent):
            out.append((ev.media_type, ev.data, ev.url))
    return out



@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tool_name", ["chart", "photo"])
def test_tool_data_block_streams_as_without_harness(tool_name, stream):
    bare = asyncio.run(_data_events(False, tool_name, stream))
    harnessed = asyncio.run(_data_events(True, tool_name, stream))
    assert bare, "bare AgentScope streams the tool's DataBlock"
    assert harnessed == bare

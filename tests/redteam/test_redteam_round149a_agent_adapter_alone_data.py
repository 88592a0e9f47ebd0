"""Round 149 a: with the agent adapter alone (no harness `on_acting` to stream a result),
every piece of a tool's stream is "another's" (`RunState.own_pieces` is only filled by the
tool adapter) and is held to the call's end; `_held_shown` then shows the text and drops
every data piece ("its data left out (the harness's `on_acting` shows the result's own)"),
which no `on_acting` does here.

README "Choices where the design is silent": "Either adapter works alone. The agent adapter
alone gives the model side ..."; README "Transparency": "With a default `HarnessConfig()`
and nothing triggering, an agent behaves as without the harness"; round 148 a's own text:
a tool's stream is "held to the call's end and shown in one piece".

Attack: a chart tool streams its text and an image (`DataBlock`, a plain URL, no secret);
the agent has `harness.middlewares()[:1]` (the agent adapter) only.
Seen: the user's stream has the text but no `ToolResultDataDeltaEvent`: the chart never
reaches the user (bare agent and both adapters: it does; round 147: it did).
Should: the tool's data is shown at the call's end (shaped as the text is), not dropped.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ToolResultDataDeltaEvent
from agentscope.message import DataBlock, TextBlock, ToolResultState, URLSource
from agentscope.tool import ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

URL = "https://charts.example.com/latency-week-49.png"


async def chart(q: str) -> Any:
    """Draw a chart.

    Args:
        q (str): The metric.
    """
    yield ToolChunk(content=[TextBlock(text=f"chart of {q}"),
                             DataBlock(id="chart-1", source=URLSource(url=URL, media_type="image/png"))],
                    state=ToolResultState.SUCCESS)


@pytest.mark.parametrize("which", ["bare", "both_adapters", "agent_adapter_alone"])
async def test_a_tools_image_reaches_the_user(which: str) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("chart", {"q": "latency"})), text("Here is the chart.")])
    middlewares = {"bare": [], "both_adapters": h.middlewares(), "agent_adapter_alone": h.middlewares()[:1]}[which]
    agent = make_agent(model, Toolkit(tools=[tool(chart)]), middlewares)
    with h.acting_for(ALICE):
        events, final = await run(agent, "show latency")
    assert final.get_text_content() == "Here is the chart."
    shown = [e.url for e in events if isinstance(e, ToolResultDataDeltaEvent)]
    assert shown == [URL], f"{which}: the tool's image reached the user as {shown}"

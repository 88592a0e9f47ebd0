"""Round 148 a: a served result (a cache before the harness's) that STREAMS a data block.

README "Combining with AgentScope's built-in middlewares": a result a middleware before the
harness's serves in `on_acting` "is shaped as the tool's would be (redacted, its `pii`
applied, fenced, withheld for what it says) as it enters the context ...; text it streams
(a `ToolChunk`) is held and shown at its end as the model reads the result". README
"Secrets": secrets "are redacted in tool results (a data block's URL and name too ...)".

Attack: the cache replays a chart result as a tool streams it: a `ToolChunk` with a text
block and a `DataBlock` whose URL carries a signed key (`?api_key=sk-proj-...`), then the
`ToolResponse`. AgentScope turns the chunk's data block into a `ToolResultDataDeltaEvent`.
Seen: the text delta is held and shaped, but the data delta is `_OTHER` to the lifecycle and
reaches the user's stream with the key in its URL. Control: the tool itself streaming the
same chunk: no key in any event.
Should: no event the user receives carries the key (held/shaped as the text is).
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import DataBlock, TextBlock, URLSource
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.stream_kit import ServesStreamed, streamed
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, payload_bytes, run, text, tool

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
URL = f"https://charts.example.com/latency.png?api_key={KEY}"


def _blocks() -> list[Any]:
    return [TextBlock(text="chart of latency"),
            DataBlock(id="chart-1", source=URLSource(url=URL, media_type="image/png"))]


async def chart(q: str) -> Any:
    """Draw a chart.

    Args:
        q (str): The metric.
    """
    async for item in streamed(_blocks):
        yield item


@pytest.mark.parametrize("cached", [False, True], ids=["tool_itself", "served_by_cache"])
async def test_a_served_results_streamed_data_block_is_redacted(cached: bool) -> None:
    h = Harness(HarnessConfig(tools={"chart": ToolPolicy(role="retrieval")}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("chart", {"q": "latency"})), text("Here is the chart.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(chart)])),
                       [*([ServesStreamed("chart", _blocks)] if cached else []), *h.middlewares()])
    with h.acting_for(ALICE):
        events, final = await run(agent, "show latency")
    leaked = [type(e).__name__ for e in events if KEY in (e.model_dump_json() if hasattr(e, "model_dump_json") else str(e))]
    assert KEY not in payload_bytes(model.calls[-1])  # the model read the URL redacted, served or not
    assert leaked == [], f"the user's stream carried the key in {leaked}"

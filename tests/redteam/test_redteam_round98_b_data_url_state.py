"""Red team, round 98 b: a tool result's image by URL from a host named by
its IP address, under a tool ``pii`` policy for ``ipv4``. The harness
rewrites the URL field as text (``http://[pii:ipv4]/chart.png``) and puts
the string back in the ``URLSource`` without validation: the agent's stored
state then holds a URL pydantic refuses, so the conversation saved after
the reply (``agent.state``, JSON) no longer loads back. A bare agent's
does; so does the harnessed one's with the image's URL left as it was."""
from __future__ import annotations

from agentscope.message import DataBlock, TextBlock, URLSource
from agentscope.state import AgentState
from agentscope.tool import ToolChunk
from round98_b_kit import bare, harnessed
from server import Reply

from agentscope_harness import HarnessConfig, ToolPolicy


async def chart(q: str) -> ToolChunk:
    """Draw a chart from the internal metrics server.

    Args:
        q (str): The metric.
    """
    return ToolChunk(content=[
        TextBlock(text=f"chart of {q}"),
        DataBlock(id="chart-1", source=URLSource(url="http://10.20.30.40/chart.png", media_type="image/png")),
    ])


def plan(server) -> None:
    server.plan(Reply(tool_calls=[("chart", {"q": "latency"})]), Reply(text="Here is the latency chart."))


async def test_the_stored_state_loads_back_after_an_image_url_is_shaped_for_pii(server) -> None:
    plan(server)
    agent, _, _ = await bare(server, [chart])
    AgentState.model_validate_json(agent.state.model_dump_json())  # bare: it loads back

    plan(server)
    config = HarnessConfig(tools={"chart": ToolPolicy(role="retrieval", pii={"ipv4": "redact"})})
    h, agent, _, final = await harnessed(server, config, [chart])
    assert final.get_text_content() == "Here is the latency chart."
    saved = agent.state.model_dump_json()
    assert "10.20.30.40" not in saved  # the policy holds in what is kept
    try:
        AgentState.model_validate_json(saved)
    except Exception as exc:  # pydantic: "Input should be a valid URL, invalid IPv6 address"
        raise AssertionError(f"the harnessed agent's saved state no longer loads: {type(exc).__name__}") from exc

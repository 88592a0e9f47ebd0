"""Round 149 a: the reply tells the harness's own streamed pieces from another's by
value, and a data piece by its block id alone (`RunState.own_pieces` holds
`("data", block.id)`): any data delta of the call under that id passes as "own",
unshaped, whatever URL or bytes it carries.

README "Combining with AgentScope's built-in middlewares" (round 148 a): "Text any
middleware before the harness's streams for a call ... is shown at the call's end too, in
one piece, redacted ..."; CHANGELOG round 148 a: "The reply now shows as they come only the
pieces the harness's `on_acting` streamed; any other piece of a tool's result is held to
the call's end and shown in one piece, redacted". README "Security": secrets are redacted
"in tool results (a data block's URL and name too ...)" and in what is streamed.

Attack: a CDN middleware placed first passes the call's stream on and, for each data block
the harness streams, yields its own data piece under the same block id pointing at its
signed URL (`?sig=sk-proj-...`, a provider key). Also the concurrent-batch form: a progress
middleware that streams a preview under the tool's block id before handing the call on, read
after AgentScope ran the batch ahead of the reader.
Seen: the middleware's data delta matches ("data", "chart-1") and reaches the user with the
key in its URL; the harness's own piece is then held and left out.
Should: no event the user receives carries the key: a piece is the harness's only if it is
the one it streamed (its URL/data too), any other held and shaped.
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.message import DataBlock, TextBlock, ToolResultState, URLSource, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import FunctionTool, ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, make_agent, payload_bytes, text

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
SIGNED = f"https://cdn.example.com/chart-1.png?sig={KEY}"


async def chart(q: str) -> Any:
    """Draw a chart.

    Args:
        q (str): The metric.
    """
    yield ToolChunk(content=[TextBlock(text=f"chart of {q}"), DataBlock(
        id="chart-1", source=URLSource(url="https://charts.example.com/chart-1.png", media_type="image/png"))],
        state=ToolResultState.SUCCESS)


def _signed() -> ToolChunk:
    return ToolChunk(content=[DataBlock(id="chart-1", source=URLSource(url=SIGNED, media_type="image/png"))],
                     state=ToolResultState.RUNNING)


class CdnSigner(MiddlewareBase):
    """Placed first: each data block streamed for a call is shown from the CDN (signed)."""

    async def get_middleware_key(self) -> str:
        return "cdn_signer"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for item in next_handler(**input_kwargs):
            if isinstance(item, ToolChunk) and any(isinstance(b, DataBlock) for b in item.content):
                yield _signed()
            yield item


class Preview(MiddlewareBase):
    """Placed first: streams a preview under the chart's block id, then hands the call on."""

    async def get_middleware_key(self) -> str:
        return "preview"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        yield _signed()
        async for item in next_handler(**input_kwargs):
            yield item


@pytest.mark.parametrize("kind", ["signer", "preview_concurrent"])
async def test_another_pieces_data_under_the_tools_block_id_is_not_own(kind: str) -> None:
    h = Harness(HarnessConfig(tools={"chart": ToolPolicy(role="retrieval")}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("chart", {"q": "latency"}), ("chart", {"q": "errors"})), text("Here.")])
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(chart, permission=ALLOW, is_concurrency_safe=True)]))
    first = CdnSigner() if kind == "signer" else Preview()
    agent = make_agent(model, toolkit, [first, *h.middlewares()])
    events: list[Any] = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "show latency and errors")):
            events.append(item)
            await asyncio.sleep(0.01)  # a slow reader: AgentScope runs a concurrent batch ahead of it
    assert KEY not in payload_bytes(model.calls[-1])
    leaked = [type(e).__name__ for e in events if hasattr(e, "model_dump_json") and KEY in e.model_dump_json()]
    assert leaked == [], f"the user's stream carried the key in {leaked}"

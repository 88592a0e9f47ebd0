"""Round 150 a: a data piece a middleware before the harness's streams (a cache replaying a
result, a progress middleware) is shown "as it comes, its link redacted" (lifecycle
`_data_shown`: `redactor.redact(url)` only): secrets are redacted, but the tool's `pii` is
never applied to the link, while the model reads the same block's URL with it applied
(outputs `shaped_data`: `filter_result(..., modes)` on the URL).

README "Configuration" (`pii`): "a tool result, streamed too, follows its tool's
`ToolPolicy.pii`: what the model read"; README "Combining": what a served result streams
"(a `ToolChunk`: text, data) is held and shown at its end as the model reads the result".

Attack: a cache (placed first) replays an export result: a `ToolChunk` with a `DataBlock`
whose URL names the customer (`.../export.csv?owner=maria.gonzalez@example.org`), then the
`ToolResponse` with the same block; `export` has `pii={"email": "redact"}`.
Seen: the model reads the URL with the address redacted; the user's stream carries it raw.
Control (`tool_itself`): the tool streaming the same chunk: no address in any event.
Should: the data piece's URL is shaped by the tool's `pii` as the model's copy is (the
same `filter_result` with `_field_modes`, in steps).
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

EMAIL = "maria.gonzalez@example.org"
URL = f"https://crm.example.com/export.csv?owner={EMAIL}"


def _blocks() -> list[Any]:
    return [TextBlock(text="export ready"),
            DataBlock(id="export-1", source=URLSource(url=URL, media_type="text/csv"))]


async def export(q: str) -> Any:
    """Export a customer's records.

    Args:
        q (str): The customer.
    """
    async for item in streamed(_blocks):
        yield item


@pytest.mark.parametrize("cached", [False, True], ids=["tool_itself", "served_by_cache"])
async def test_a_streamed_data_pieces_link_follows_the_tools_pii(cached: bool) -> None:
    h = Harness(HarnessConfig(tools={"export": ToolPolicy(role="retrieval", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("export", {"q": "maria"})), text("Here is the export.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(export)])),
                       [*([ServesStreamed("export", _blocks)] if cached else []), *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "export maria's records")
    leaked = [type(e).__name__ for e in events
              if EMAIL in (e.model_dump_json() if hasattr(e, "model_dump_json") else str(e))]
    assert EMAIL not in payload_bytes(model.calls[-1])  # the model read the link with the address redacted
    assert leaked == [], f"the user's stream carried the address the model never read, in {leaked}"

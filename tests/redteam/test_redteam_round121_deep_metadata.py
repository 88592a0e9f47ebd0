"""Round 121 (crafted input on a result's metadata). A tool whose metadata is nested a few
hundred levels deep (a tool that keeps the upstream API's parsed JSON document in its
metadata; the document is the remote side's to shape) makes the harnessed reply raise:
``outputs.readable_metadata`` cleans the metadata recursively (``cleaned_args`` ->
``<dictcomp>`` -> ``_labelled`` -> ``cleaned_args``: three frames a level) and hits
``RecursionError`` at ~300 levels. It runs in ``tool_adapter.to_response``, after the
``try`` of ``HarnessToolAdapter._shaped`` that turns a shaping failure into the
fail-closed ``policy_error`` result, so the error escapes AgentScope's tool execution and
the whole reply fails with an ``ExceptionGroup`` (every parallel call of the batch
with it). The bare agent, same tool, same metadata (900 levels too), answers.

README hook 14 content_filter (which cleans the result, its metadata included: "and the
result's metadata ...: it streams to the UI in the result's end event"): "Fails closed."
(a result it cannot clean is withheld, the run goes on: ``_failed`` -> "The call to
fetch_page could not be completed safely"); a crafted result should cost the caller that
result, not the reply.
"""
from __future__ import annotations

import pytest
from agentscope.message import TextBlock
from agentscope.tool import ToolChunk

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, measure

pytestmark = pytest.mark.asyncio


def nested(depth: int) -> dict:
    doc: object = "leaf"
    for _ in range(depth):
        doc = {"children": doc}
    return {"document": doc}


async def fetch_page(url: str) -> ToolChunk:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return ToolChunk(content=[TextBlock(text="page fetched")], metadata=nested(400))


async def test_deeply_nested_metadata_costs_the_result_not_the_reply() -> None:
    config = HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")})
    bare = await measure(FETCH_PAGE, [fetch_page], "read the page", config, harnessed=False, model="m")
    assert bare.result == "done" and len(bare.model.calls) == 2
    harnessed = await measure(FETCH_PAGE, [fetch_page], "read the page", config, harnessed=True, model="m")
    assert harnessed.result == "done" and len(harnessed.model.calls) == 2

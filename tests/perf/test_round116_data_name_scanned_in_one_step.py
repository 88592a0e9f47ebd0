"""Round 116 (adversarial performance). A retrieval tool's data block whose name is a megabyte of prose holds the
event loop for hundreds of ms in one step: the injection detector reads the
data blocks' names beside the result's text in one synchronous call, and
unlike the text (truncated to 16 KB first) the names are not bounded.

README, hook 16 ``content_fence``: "In slices: a result of megabytes never
holds the event loop"; "The names of its data blocks (an image's) are judged
with its text"; Benchmarks: 1 MB tool result end to end, longest loop block
goal <= 5 ms. Cause: ``hooks/safety.content_fence`` ->
``_injection(ctx, "\\n".join((text, *result.data_names)))`` ->
``HeuristicDetector.score`` on the whole joined text.
"""

from __future__ import annotations

import pytest
from agentscope.message import DataBlock, TextBlock, URLSource
from agentscope.tool import ToolChunk

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, loop_gaps

pytestmark = pytest.mark.asyncio

# ordinary prose (no injection): the words a product page uses
NAME = ("Use the tool with your own settings: run it from the system menu, then call support. " * 12_000)[:1_000_000]


async def fetch_page(url: str) -> ToolChunk:
    """Fetch a web page and its picture.

    Args:
        url (str): The page.
    """
    return ToolChunk(content=[TextBlock(text="page fetched"),
                              DataBlock(name=NAME, source=URLSource(url="https://example.com/a.png",
                                                                    media_type="image/png"))])


async def test_a_megabyte_data_name_is_judged_without_holding_the_event_loop() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        FETCH_PAGE, [fetch_page], "read the page",
        HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")}), model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (  # was 204 ms
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

"""Round 95 red team: a data block's URL is redacted in one step."""

from __future__ import annotations

from agentscope.message import DataBlock, TextBlock, URLSource
from agentscope.tool import ToolChunk
from hookkit import drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig
from tests.perf.loopkit import longest_block

GLUED = "AKIA" * 250_000  # the README's own worst case: key ids glued end to end, ~1 MB


async def test_a_megabyte_data_block_url_is_redacted_without_holding_the_event_loop() -> None:
    """A tool result's text over 16 KB is redacted in steps (the loop gets a
    turn every millisecond; a crafted megabyte dense with anchors is "spread
    over many steps"). A data block's URL is part of the result and is
    redacted too (README), but ``readable_data`` does it in one synchronous
    call: a tool (an MCP resource link, an image returned as a ``data:``
    URL) whose URL is a megabyte of glued key ids holds every other reply
    of the process for about half a second."""
    url = "https://files.example.com/r.png?q=" + GLUED

    async def snapshot(q: str) -> ToolChunk:
        """Take a snapshot.

        Args:
            q (str): The query.
        """
        return ToolChunk(content=[TextBlock(text="snapshot taken"),
                                  DataBlock(source=URLSource(url=url, media_type="image/png"))])

    h, model, agent = harnessed(HarnessConfig(), [calls(("snapshot", {"q": "x"})), text("done")], [snapshot])
    gap = await longest_block(drive(h, agent))
    assert len(model.calls) == 2
    assert gap < 0.15, f"the event loop was held {gap * 1000:.0f} ms in one step"

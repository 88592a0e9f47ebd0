"""A result with many data blocks, each with a name just under 16 KB (``redaction.ASYNC_INLINE``):
``tool_adapter._shaped`` shapes them one after the other (``outputs.shaped_data``), each
name redacted inline (``redact_async``: under 16 KB, one step: ~8 ms for 16 KB of
glued key ids ``AKIAAKIA...``) and its markers neutralised
(``sliced``: its 1 ms clock restarts at every call, so a 16 KB name never yields), with no
turn of the loop between blocks. 64 such names (1 MB) are shaped in one step of the loop.

README Security: "a result over 16 KB is redacted, then its personal data rewritten, on the
event loop's own thread in steps ... and the loop gets a turn after every millisecond of
work"; its *Limits*: "a crafted megabyte dense with anchors costs CPU, spread over many
steps (... about 1 s for key ids glued end to end: `AKIAAKIA…`)"; hook 16 content_fence: "a result of megabytes never holds the event loop". Same
measure as tests/perf/test_round116_data_name_scanned_in_one_step.py (harnessed vs bare).
"""
from __future__ import annotations

import base64

import pytest
from agentscope.message import Base64Source, DataBlock, TextBlock
from agentscope.tool import ToolChunk

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, loop_gaps

pytestmark = pytest.mark.asyncio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 20).decode()
NAME = ("AKIA" * 4_000)[:16_000]  # key ids glued end to end (README: "spread over many steps")
BLOCKS = 64


async def fetch_page(url: str) -> ToolChunk:
    """Fetch a page with its scans.

    Args:
        url (str): The page.
    """
    return ToolChunk(content=[TextBlock(text="scans attached"), *[
        DataBlock(name=f"{i}:{NAME}", source=Base64Source(data=PNG, media_type="image/png")) for i in range(BLOCKS)]])


async def test_many_long_names_are_shaped_without_holding_the_loop() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        FETCH_PAGE, [fetch_page], "read the page",
        HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")}), model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

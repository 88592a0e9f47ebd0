"""Round 150 a: a data piece a middleware before the harness's streams is shown "as it
comes, its link redacted" (lifecycle `_data_shown`): `redactor.redact(event.url)` is ONE
synchronous call over the whole link on the event loop's thread, however long it is.
The model's copy of a data block's URL is shaped in steps (outputs `shaped_data`: "in
steps (a megabyte URL, or many long names, never hold the event loop)").

README "Security" (Secrets): "a result over 16 KB is redacted, then its personal data
rewritten, on the event loop's own thread in steps ... and the loop gets a turn after
every millisecond of work: the longest wait is 1-1.5 ms for 1 MB of ordinary text and a
few ms for 1 MB crafted to be dense with anchors".

Attack: a progress middleware (first) streams a `DataBlock` whose URL is a 4 MB presigned
link dense with access-key ids (`AKIA...,` repeated), then hands the call on to `lookup`.
Seen: the event loop is held in one step for well over 100 ms (the bare agent with the
same middleware: a few ms); the tool streaming the same block itself is shaped in steps.
Should: the link is redacted in slices (`redact_async`) as a text piece is.
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultDataDeltaEvent
from agentscope.message import DataBlock, URLSource

from agentscope_harness import ToolPolicy
from tests.redteam.stream_kit import StreamsAround, loop_gap

pytestmark = pytest.mark.asyncio

UNIT = "AKIAIOSFODNN7EXAMPLE,"
URL = "https://files.example.com/bundle.zip?keys=" + UNIT * (4_000_000 // len(UNIT))


def _bundle() -> StreamsAround:
    """A user's progress reporter, placed first: streams the bundle's link, then delegates."""
    return StreamsAround(before=[[DataBlock(id="bundle-1", source=URLSource(url=URL, media_type="application/zip"))]])


async def test_a_streamed_data_link_is_not_redacted_in_one_step() -> None:
    bare, _ = await loop_gap(_bundle(), False, ToolPolicy(role="retrieval"))
    gap, events = await loop_gap(_bundle(), True, ToolPolicy(role="retrieval"))
    shown = [e for e in events if isinstance(e, ToolResultDataDeltaEvent)]
    assert shown and "AKIAIOSFODNN7EXAMPLE" not in (shown[0].url or "")  # redacted, as promised
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same middleware: {bare * 1000:.1f} ms)")

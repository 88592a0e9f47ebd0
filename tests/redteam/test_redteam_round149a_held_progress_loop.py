"""Round 149 a: text a middleware before the harness's streams for a call (progress) is
held to the call's end and its personal data rewritten in ONE synchronous `apply_pii`
call over the whole held text (lifecycle `_held_shown`), on the event loop's thread.

README "Security" (Secrets): "a result over 16 KB is redacted, then its personal data
rewritten, on the event loop's own thread in steps (a pass, a 64 KB window of it, ...)
and the loop gets a turn after every millisecond of work: the longest wait is 1-1.5 ms
for 1 MB of ordinary text and a few ms for 1 MB crafted to be dense with anchors";
README "Combining": progress text "is shown at the call's end too, in one piece,
redacted and shaped by the tool's `pii`".

Attack: a progress middleware (first) streams a 2 MB log of the records it scans (an
address per line), 64 KB a chunk, then hands the call on to `lookup`
(`pii={"email": "redact"}`).
Seen: the redaction is in slices, but `apply_pii` runs over the whole megabyte in one
step: the event loop is held a few hundred ms (the bare agent with the same middleware:
a few ms).
Should: the held text's pii is rewritten in steps as a result's is (`_pii_in_pieces`).
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import TextBlock

from agentscope_harness import ToolPolicy
from tests.redteam.stream_kit import StreamsAround, loop_gap

pytestmark = pytest.mark.asyncio

LINE = "scanned record 00417 owner maria.gonzalez@example.org status active\n"
LOG = LINE * (2_000_000 // len(LINE))
STEP = 64 * 1024


def _scan_log() -> StreamsAround:
    """A user's progress reporter, placed first: streams its scan log, then delegates."""
    return StreamsAround(before=[[TextBlock(text=LOG[start:start + STEP])] for start in range(0, len(LOG), STEP)])


POLICY = ToolPolicy(role="retrieval", pii={"email": "redact"})


async def test_held_progress_pii_does_not_hold_the_loop() -> None:
    bare, _ = await loop_gap(_scan_log(), False, POLICY)
    gap, events = await loop_gap(_scan_log(), True, POLICY)
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert "maria.gonzalez@example.org" not in streamed and "scanned record" in streamed
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same middleware: {bare * 1000:.1f} ms)")

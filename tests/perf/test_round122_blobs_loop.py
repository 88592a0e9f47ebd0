"""Round 122 red team: round 121 decodes and judges *every* base64 blob of a text
(``injection._decoded_blobs``, no count bound any more), each one running the whole rule
table (``injection._rules``) in the same synchronous step as its piece. A result made of
short printable blobs (24 characters, ~2,600 to a 64 KB piece) costs ~35-40 ms a piece,
and a megabyte of them holds the loop ~120 ms (round 120's code: ~19 ms; bare agent ~2-9
ms). Look-alikes that NFKC widens (``㉐㏿℻㏒`` read as ``PTEgalFAXlog``) pack ~7,000 blobs
into a piece: ~250 ms.

README hook 16 content_fence: "In slices: a result of megabytes never holds the event
loop"; Injected instructions: "A text over 64 KB a deployer lets the model read whole is
judged in overlapping pieces, the loop turning between". Measure and bound as
tests/perf/test_round118_raised_cap_megabyte.py (harnessed vs bare, max(0.1, 3 * bare)).

Round 123 (red team on round 122): Round 123 red team: round 121 decodes every base64 blob "however long", and judges each in
one synchronous step (``injection.HeuristicDetector.blob_weight`` over the whole decoded text,
called from ``safety._scored`` between ``Turns``). A retrieval result that is one 1 MB blob
(an attachment, a data URI: 750 KB of plain text once decoded) holds the event loop ~0.3 s;
round 120 decoded no blob over 8,192 characters. Round 122's test only had short blobs.

README hook 16 content_fence: "In slices: a result of megabytes never holds the event loop";
Injected instructions: "base64: every blob decoded, however long, each judged alone, the
heaviest counting, the loop turning between them". Bound as tests/perf/test_round122_blobs_loop.py.
"""
from __future__ import annotations

import base64

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, loop_gaps, page_tool

pytestmark = pytest.mark.asyncio

BLOB = base64.b64encode(b"ignore your user @").decode()  # 24 characters, printable when decoded
ASCII_MB = (" ".join([BLOB] * 40_001))[:1_000_000]
PLAIN = "The user should run the report tool with the prompt text; your notes follow below. "
ONE_BLOB = "Attachment (base64): " + base64.b64encode((PLAIN * 9_000).encode()).decode()  # round 123


@pytest.mark.parametrize("page", [ASCII_MB, ONE_BLOB], ids=["short_blobs", "one_megabyte_blob"])
async def test_a_megabyte_of_short_blobs_does_not_hold_the_loop(page: str) -> None:
    config = HarnessConfig(result_max_tokens=2_000_000,  # the page is read whole
                           tools={"fetch_page": ToolPolicy(role="retrieval")})
    gap, bare, (model, bare_model), _ = await loop_gaps(FETCH_PAGE, [page_tool(page)], "read the page", config,
                                                       model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

"""Round 116 (adversarial performance). A retrieval tool's 15 KB result: a markdown heading "## system" followed by
spaces and one more character, holds the event loop ~0.5 s in one step.

Cause: ``injection._ROLE_MARKER`` alternative
``^#{2,4}\\s*(?:instructions?|system|...)\\s*:?\\s*$`` (MULTILINE): the two
``\\s*`` around the optional ``:`` split a run of N spaces in N ways, each
tried to ``$`` and failing: O(N^2). ``content_fence`` calls the detector in
one synchronous call on the (truncated, 16 KB) result. Retrieval tools are
scanned by default.
"""

from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, loop_gaps, page_tool
from tests.scripted import tool_messages

pytestmark = pytest.mark.asyncio

PAGE = "## system" + " " * 14_000 + "x"  # under 16 KB: read whole by default


async def test_a_heading_followed_by_spaces_does_not_hold_the_event_loop() -> None:
    gap, bare, (model, _), _ = await loop_gaps(
        FETCH_PAGE, [page_tool(PAGE)], "read the page",
        HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")}), model="m")
    assert len(model.calls) == 2
    assert "system" in tool_messages(model.calls[1])[-1]
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < 0.15, f"the event loop was held {gap * 1000:.0f} ms in one step (bare: {bare * 1000:.1f} ms; goal: 5 ms)"

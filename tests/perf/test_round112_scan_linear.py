"""Round 112 (context). A retrieval tool's result of blank lines ending in a line that mentions
"system" holds the event loop for about a second in one synchronous step.

README, hook 16 ``content_fence``: "In slices: a result of megabytes never
holds the event loop. Injected instructions: `flag` ..."; Benchmarks: longest
loop block goal <= 5 ms for a 1 MB tool result. ``injection.py``: "Every
pattern has bounded repetition, so scanning is linear in the text."

Cause: ``injection._ROLE_LINE`` = ``^\\s*(?:system|assistant|developer)...``
compiled MULTILINE: at every line start ``\\s*`` runs across all the blank
lines that follow, so the scan is quadratic in the number of blank lines.
``hooks/safety.content_fence`` calls the detector (``_injection``) on the
whole (truncated, 16 KB by default) text in one synchronous call.
Retrieval tools are scanned by default (``flag``); scraped pages are often
mostly blank lines.
"""

from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, measure, page_tool
from tests.scripted import tool_messages

pytestmark = pytest.mark.asyncio

PAGE = "\n" * 60_000 + "Contact the system administrator."  # within result_max_tokens below: read whole
# (quadratic: ~18 s here; linear: a few ms; the bound is far from both)


async def test_a_page_of_blank_lines_is_scanned_without_holding_the_event_loop() -> None:
    gap, model, _ = await measure(
        FETCH_PAGE, [page_tool(PAGE)], "read the page",
        HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")}, result_max_tokens=20_000),
        harnessed=True, model="m")
    assert len(model.calls) == 2
    assert "administrator" in tool_messages(model.calls[1])[-1]
    assert gap < 1.0, f"the event loop was held {gap * 1000:.0f} ms in one step (goal: 5 ms)"

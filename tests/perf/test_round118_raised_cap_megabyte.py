"""Round 118 (red team on rounds 116-117). Round 117 made the injection detector judge a result's whole text in one synchronous
call again (``hooks/safety._injection`` -> ``detector.score(text)``; round 116's
``_scored`` slices, which turned the loop every 16 KB, were removed). The text is cut to
``result_max_tokens`` first, so the default config judges 16 KB; but a deployer who lets
the model read a long page whole (a raised ``result_max_tokens``, as
tests/redteam/test_redteam_round117_injection_whole.py does) has a 1 MB retrieval result
hold the event loop ~300 ms in one step, every other reply of the process waiting, while
every other pass over that result (redaction, the fence's neutralising, novelty) turns the
loop.

README hook 16 content_fence: "In slices: a result of megabytes never holds the event
loop"; hook 14: "in steps for results over 16 KB (the event loop gets a turn every
millisecond of work)". Same measure as tests/perf/test_round116_data_name_scanned_in_one_step.py
(harnessed against bare, same result)."""
from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, loop_gaps, page_tool

pytestmark = pytest.mark.asyncio

# ordinary prose (no injection), as in tests/perf/test_round116_data_name_scanned_in_one_step.py
PAGE = ("Use the tool with your own settings: run it from the system menu, then call support. " * 12_000)[:1_000_000]


async def test_a_megabyte_result_read_whole_is_judged_without_holding_the_loop() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        FETCH_PAGE, [page_tool(PAGE)], "read the page",
        HarnessConfig(result_max_tokens=300_000,  # the page is read whole
                      tools={"fetch_page": ToolPolicy(role="retrieval")}), model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    assert "call support" in repr(model.calls[-1].formatted)[-3000:]  # read whole, its end too
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

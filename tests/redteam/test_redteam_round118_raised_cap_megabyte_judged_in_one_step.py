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

import asyncio
import time

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

# ordinary prose (no injection), as in tests/perf/test_round116_data_name_scanned_in_one_step.py
PAGE = ("Use the tool with your own settings: run it from the system menu, then call support. " * 12_000)[:1_000_000]


async def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url (str): The page.
    """
    return PAGE


async def _longest_gap(work: asyncio.Future) -> float:
    longest, last = 0.0, time.perf_counter()
    while not work.done():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    await work
    return longest


async def _gap(harnessed: bool) -> tuple[float, ScriptedModel]:
    model = ScriptedModel([calls(("fetch_page", {"url": "https://example.com"})), text("done")], model="m")
    harness = Harness(HarnessConfig(result_max_tokens=300_000,  # the page is read whole
                                    tools={"fetch_page": ToolPolicy(role="retrieval")}),
                      load_entry_points=False, environ={})
    if harnessed:
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(fetch_page)])), harness.middlewares())
    else:
        agent = make_agent(model, [fetch_page])

    async def drive() -> None:
        with harness.acting_for(ALICE):
            await run(agent, "read the page")
    return await _longest_gap(asyncio.ensure_future(drive())), model


async def test_a_megabyte_result_read_whole_is_judged_without_holding_the_loop() -> None:
    bare, bare_model = await _gap(False)
    gap, model = await _gap(True)
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    assert "call support" in repr(model.calls[-1].formatted)[-3000:]  # read whole, its end too
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

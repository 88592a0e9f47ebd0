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

import asyncio
import time

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

PAGE = "## system" + " " * 14_000 + "x"  # under 16 KB: read whole by default


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
    if harnessed:
        harness = Harness(HarnessConfig(tools={"fetch_page": ToolPolicy(role="retrieval")}),
                          load_entry_points=False, environ={})
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(fetch_page)])), harness.middlewares())

        async def drive() -> None:
            with harness.acting_for(ALICE):
                await run(agent, "read the page")
    else:
        agent = make_agent(model, [fetch_page])

        async def drive() -> None:
            await run(agent, "read the page")
    return await _longest_gap(asyncio.ensure_future(drive())), model


async def test_a_heading_followed_by_spaces_does_not_hold_the_event_loop() -> None:
    bare, _ = await _gap(False)
    gap, model = await _gap(True)
    assert len(model.calls) == 2
    assert "system" in tool_messages(model.calls[1])[-1]
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < 0.15, f"the event loop was held {gap * 1000:.0f} ms in one step (bare: {bare * 1000:.1f} ms; goal: 5 ms)"

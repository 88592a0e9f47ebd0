"""Round 130 b: JSON-escaped accented letters in the e-mail detector (round 129)
make a crafted megabyte cost seconds, in steps of tens of milliseconds.

Promise (README, Security "Secrets": "a result over 16 KB is redacted, then its
personal data rewritten, on the event loop's own thread in steps ... and the loop
gets a turn after every millisecond of work: the longest wait is 1-1.5 ms for 1 MB
of ordinary text and a few ms for 1 MB crafted to be dense with anchors"; hook 16
"In slices: a result of megabytes never holds the event loop"; Benchmarks "1 MB tool
result end to end: harness time ... <= 15 ms").

Attack: a fetched page (tool `pii={"email": "redact"}`) of 1 MB made of
`\\u00e9` sixty times then `@`, repeated: nothing an honest JSON encoder would not
write (`json.dumps("é"*60 + "@")`).

What happens: `pii.DETECTORS["email"]` may start a value after every backslash and
after every `\\uXXXX`, and each escaped letter is now an address character, so each of
the ~330,000 starts reads up to 62 escaped letters and backtracks over them: each
4 KB PiiStream step is one ~30-45 ms `find_pii` call (round 128's code: ~0.3 ms), the
whole result ~4.5 s of CPU (round 128: ~65 ms) on the event loop's thread: the loop is
held ~75-130 ms at a time (bare agent: ~10-18 ms), the reply takes ~5 s (bare: ~0.1-0.2
s), and content_filter, at the edge of its 5 s hook timeout, sometimes times out: the
page (no address in it) is then withheld from the model.
Fix (pii.py email pattern): no value starts inside a run of escaped letters (the
lookbehind should treat `\\uXXXX` of an address letter as a letter: start only where
`_AFTER_ESCAPE`'s escape is no address letter), or bound the scan by the decoded length.
"""
from __future__ import annotations

import time

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import FETCH_PAGE, elapsed, loop_gaps, measure, page_tool
from tests.scripted import tool_messages

pytestmark = pytest.mark.asyncio

PAGE = ("\\u00e9" * 60 + "@") * (1_000_000 // 361)
CONFIG = HarnessConfig(result_max_tokens=2_000_000,  # the page is read whole
                       tools={"fetch_page": ToolPolicy(role="retrieval", pii={"email": "redact"})})


async def test_a_megabyte_of_escaped_near_addresses_does_not_hold_the_loop() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(FETCH_PAGE, [page_tool(PAGE)], "read the page", CONFIG,
                                                       model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")


async def test_a_megabyte_of_escaped_near_addresses_costs_no_seconds() -> None:
    started = time.perf_counter()
    bare = await measure(FETCH_PAGE, [page_tool(PAGE)], "read the page", CONFIG, harnessed=False, model="m",
                         gauge=elapsed)
    bare_s = time.perf_counter() - started
    started = time.perf_counter()
    side = await measure(FETCH_PAGE, [page_tool(PAGE)], "read the page", CONFIG, harnessed=True, model="m",
                         gauge=elapsed)
    harnessed_s = time.perf_counter() - started
    assert len(side.model.calls) == 2 and len(bare.model.calls) == 2
    read = "\\u00e9" * 60 in tool_messages(side.model.calls[-1])[-1]  # no address in it: passed as it is
    print(f"reply: harnessed {harnessed_s * 1000:.0f} ms, bare {bare_s * 1000:.0f} ms, page read: {read}")
    assert read and harnessed_s < max(2.0, 5 * bare_s), (
        f"one 1 MB result took {harnessed_s:.1f} s harnessed, {bare_s:.2f} s bare; the model read the page: {read} "
        "(False: content_filter timed out at 5 s and withheld the result)")

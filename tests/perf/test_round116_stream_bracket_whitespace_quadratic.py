"""Round 116 (adversarial performance). A streamed answer in which a ``[`` is followed by a long run of spaces costs
the harness ~100-1000x what an ordinary answer of the same size costs: the
marker stream re-reads the whole held run, character by character, on every
delta.

README "What the caller receives"/Security: markers the model echoes are
removed from the stream; outputs.py: "The stream side of each step holds back
only what could still change ... Every step costs what the text costs."; the
issue's goal: a trigger must not make the cost jump, per-round work O(new data).

Cause: ``sentinels.MarkerStream.feed`` -> ``marker_open(buf, pos)`` reads
``buf`` from the held bracket (through every space or invisible character,
up to ``_REACH`` = 4,096) again for each delta, with ``_reads`` per character:
O(held) per delta, O(n^2 / delta size) per run of 4 KB.
"""

from __future__ import annotations

import pytest

from tests.perf.loopkit import elapsed, measure
from tests.scripted import search, text

pytestmark = pytest.mark.asyncio

CHUNK = 8  # characters per streamed delta (a few tokens)
CRAFTED = ("[" + " " * 4000 + "x\n") * 5  # ~20 KB
ORDINARY = ("The order shipped on Monday; see the tracking page for details.\n" * 400)[: len(CRAFTED)]


async def _reply_time(answer: str, harnessed: bool) -> tuple[float, str]:
    seconds, _, final = await measure([text(answer)], [search], "hi", harnessed=harnessed, instrument=False,
                                      gauge=elapsed, model="m", stream=True, chunk=CHUNK)
    return seconds, final


async def test_a_bracket_before_spaces_costs_what_the_text_costs() -> None:
    bare_crafted, _ = await _reply_time(CRAFTED, False)
    bare_ordinary, _ = await _reply_time(ORDINARY, False)
    ordinary, _ = await _reply_time(ORDINARY, True)
    crafted, answer = await _reply_time(CRAFTED, True)
    assert answer.count("x") == 5
    print(f"\n{len(CRAFTED)} chars in {CHUNK}-char deltas: harnessed crafted {crafted * 1000:.0f} ms, "
          f"ordinary {ordinary * 1000:.0f} ms; bare crafted {bare_crafted * 1000:.0f} ms, "
          f"ordinary {bare_ordinary * 1000:.0f} ms")
    harness_crafted = crafted - bare_crafted
    harness_ordinary = max(ordinary - bare_ordinary, 0.001)
    assert harness_crafted < 5 * harness_ordinary + 0.05, (
        f"the harness's own cost of a {len(CRAFTED)}-character answer is {harness_crafted * 1000:.0f} ms when "
        f"its brackets are followed by spaces, {harness_ordinary * 1000:.0f} ms for ordinary text")

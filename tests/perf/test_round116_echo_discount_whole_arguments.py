"""Round 116 (adversarial performance). A call whose argument is a ~1 MB text (a file the model writes) holds the
event loop ~0.2 s in one step after its tool answers a few words: the
novelty tracker reads every word of the arguments to find the (at most 16,
of at most 8 words) phrases it discounts from the result, and the argument
filter reads them in one step too.

README, hook 20 ``drift_result_tracker``: "Linear in what the model reads, of
which it judges at most the two ends truncation would keep of 4,000 tokens
(16 KB ...; ... about a millisecond on the event loop)"; facts.ECHO_PHRASES:
"the echo of a query, not of a batch of thousands of ids, whose cost would
grow with ids times their occurrences"; the issue's goal: no single block
over 5 ms.

Cause: ``facts._echoed`` runs ``_echo`` (``_WORD.findall`` on every string of
the arguments) and ``_words(" ".join(phrase))`` on every phrase, to keep only
those of <= 8 words: a phrase of a million words is read whole (twice) to be
dropped; a list repeating one short phrase, or of phrases over 8 words, is
read whole too (60,000 nine-word strings: ~0.5 s). Called from
``hooks/drift.drift_result_tracker`` -> ``Novelty.add``, synchronous.
(Also in one step, ~50-80 ms a MB: ``outputs.JsonEscapes.feed`` ->
``canonical_escapes`` and the stream redactor on the whole arguments of a
model that does not stream.)
"""

from __future__ import annotations

import pytest

from tests.perf.loopkit import loop_gaps
from tests.scripted import calls, text

pytestmark = pytest.mark.asyncio

LOG = "".join(f"2026-12-05 10:{i // 60 % 60:02d}:{i % 60:02d} GET /api/items/{i} 200 12ms\n" for i in range(20_000))
# ~1 MB: a file the model writes (an access log it was asked to save)


async def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path (str): Where.
        content (str): What.
    """
    return f"wrote {len(content)} characters"


async def test_the_echo_of_a_bulk_call_is_not_read_whole_in_one_step() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        [calls(("write_file", {"path": "access.log", "content": LOG})), text("done")], [write_file],
        "save the log", model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < bare + 0.1, (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same call: {bare * 1000:.1f} ms)")

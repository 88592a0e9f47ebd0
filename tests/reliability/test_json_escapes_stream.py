"""``outputs.JsonEscapes``: the JSON escape stage of a streamed tool call's
arguments, fed in pieces, writes what ``canonical_escapes`` writes of the
whole text, and in time linear in it however long what it must hold.

The held cases: a partial escape (``\\u00``), a run of backslashes whose
end is not known yet, and an even run followed by a quote, whose reading
(a quote inside the string, as AgentScope's repair reads it, or the
string's end) waits on the first character after the quote that is not
whitespace: the whitespace between may be long and arrive a character at
a time.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness.outputs import JsonEscapes, canonical_escapes

_PIECES = st.sampled_from([
    "\\", "\\\\", '"', " ", "\t", "\n", "\u3000", "a", "u", "0", "0041", "x4", "d83d", "\\ude00", ",", "}", ":", "]",
    "'", "\u201c", "/", "secret",
])


def _fed(text: str, cuts: list[int]) -> str:
    escapes, out, at = JsonEscapes(), [], 0
    for cut in sorted(set(cuts)):
        out.append(escapes.feed(text[at:cut]))
        at = cut
    out.append(escapes.feed(text[at:]))
    out.append(escapes.flush())
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join), st.data())
def test_fed_in_pieces_it_writes_what_the_whole_text_gives(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    whole, held = canonical_escapes(text)
    assert _fed(text, cuts) == whole + held


def _delta_times(raw: str, chunk: int) -> tuple[list[float], str]:
    escapes, times, out = JsonEscapes(), [], []
    for i in range(0, len(raw), chunk):
        start = time.perf_counter()
        out.append(escapes.feed(raw[i:i + chunk]))
        times.append(time.perf_counter() - start)
    out.append(escapes.flush())
    return times, "".join(out)


def test_whitespace_after_a_quote_that_waits_is_held_at_the_cost_of_its_length() -> None:
    """An even backslash run and a quote, then 400,000 spaces a character
    a delta: each delta costs what it is (before: the held spaces were
    joined and searched again at every delta, quadratic in their length),
    and the text comes out whole once the next character decides."""
    n = 400_000
    raw = '{"a": "x\\\\"' + " " * n + ', "b": 1}'
    times, shown = _delta_times(raw, 1)
    early = sorted(times[2_000:12_000])[5_000]
    late = sorted(times[-10_000:])[5_000]
    assert late < 4 * early + 5e-6, (early, late)
    assert shown == canonical_escapes(raw)[0]

"""Novelty's fast paths (issue 16: a large result's kept ends are judged in
C calls, not a Python step per word) read a text exactly as the plain
definitions do. The reference below is the definition: every ``\\w+`` word
of the lowercased text, named ids and volatile spans blanked, id words left
out; a shingle per run of ``SHINGLE_WORDS`` words."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness import facts
from agentscope_harness.facts import ID_MIN, SHINGLE_WORDS, Novelty

_PIECES = st.one_of(
    st.text(alphabet="abcdef0123456789", min_size=1, max_size=24),  # hex: ids or not
    st.text(alphabet="abcxyz_0123456789", min_size=1, max_size=30),  # base64-ish tokens
    st.text(alphabet="éßΣж٣Ⅻ中文abc", min_size=1, max_size=6),  # other scripts, other digits
    st.sampled_from([
        "request id: ", "trace_id=", "span-id '", "correlation id=\"", "Request_ID:", "id: ",
        "2026-12-01T10:00:00Z", "12ms", "0.5 s", "10:00:00", "1f0e8a2c-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
        "order", "kettle", "Asia", "secret",
    ]),
)
_SEPARATORS = st.sampled_from([" ", "  ", "-", ":", ".", "\n", "\"", "=", ", ", "_", ""])
_TEXTS = st.lists(st.tuples(_PIECES, _SEPARATORS), max_size=60).map(lambda ps: "".join(a + b for a, b in ps))


def _reference_words(text: str) -> list[str]:
    text = facts._VOLATILE_SPAN.sub(" ", facts._NAMED_ID.sub(" ", text.lower()))
    return [w for w in facts._WORD.findall(text) if len(w) < ID_MIN or not facts._ID_WORD.fullmatch(w)]


def _reference_shingles(words: list[str]) -> set[int]:
    k = min(SHINGLE_WORDS, len(words))
    return {hash(tuple(words[i:i + k])) for i in range(len(words) - k + 1)} if words else set()


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_the_words_of_a_text_are_the_definitions(text: str) -> None:
    assert facts._words(text) == _reference_words(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=12))
def test_the_shingles_of_words_are_the_definitions(words: list[str]) -> None:
    assert facts._shingles(words) == _reference_shingles(words)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=6))
def test_what_is_new_is_what_was_not_seen(texts: list[str]) -> None:
    """Below the cap: a result is new exactly when its shingles were not all
    recorded before, counted as the plain definition counts them."""
    novelty, seen = Novelty(), set()
    for text in texts:
        shingles = _reference_shingles(_reference_words(text))
        assert novelty._record(shingles) == (len(shingles - seen), len(shingles))
        seen |= shingles


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=40), st.lists(st.sets(st.integers(0, 200), max_size=50), max_size=8))
def test_the_record_is_bounded_and_remembers_the_newest(cap: int, batches: list[set[int]]) -> None:
    """At most ``cap`` hashes (two generations of ``cap // 2``, at least
    one), and what a batch brought new is remembered (when it fits a
    generation): recording it again finds nothing new."""
    novelty = Novelty(cap=cap)
    for batch in batches:
        fresh = batch - novelty.newer - novelty.older
        assert novelty._record(batch) == (len(fresh), len(batch))
        assert len(novelty.newer) <= max(cap // 2, 1) and len(novelty.older) <= max(cap // 2, 1)
        if len(fresh) <= max(cap // 2, 1):
            assert novelty._record(fresh)[0] == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=5), _TEXTS)
def test_judging_remembers_nothing_until_kept(earlier: list[str], text: str) -> None:
    """Rounds 167-168 a: a result is judged, then remembered only once the model reads it
    (a withheld one is not heard): judging leaves the record as it was."""
    novelty = Novelty()
    for seen in earlier:
        novelty.add(seen)
    before = (set(novelty.newer), set(novelty.older), dict(novelty.results))
    heard = novelty.judge(text)
    assert novelty.judge(text) == heard
    assert (novelty.newer, novelty.older, novelty.results) == before
    novelty.keep(heard)
    assert not novelty.judge(text).news  # heard once, the same text again is no news

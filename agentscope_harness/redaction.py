"""Secret redaction for tool results, final answers and streamed text.

Every built-in secret is a *shape*: an opening literal (its anchor) followed by
a sequence of character-class runs whose adjacent classes are disjoint. That
makes each shape deterministic: a regex attempt never backtracks into an
earlier run, so matching costs what it reads, and every pattern starts with a
literal, which ``re`` finds with its fast prefix search. Batch redaction runs
every shape over the whole text, always (no prefilter, so a trigger word
changes nothing), in about a millisecond per megabyte a shape: anchors
without a shared opening are searched by their shared tail (``_at_leads``),
and a shape wholly within another is found in its pass. A large text is
redacted pass by pass, giving the event loop a turn between (``sliced``).
Private-key blocks are found by hand: the header, then the
first END line with ``str.find``; a block with no END line runs to the end.

Streamed text cannot be unsent: the stream redactor tracks every anchor it has
seen and holds back from the first one whose text could still become a secret
(an open key block, a JWT still growing, ...), plus the last ``window``
characters for the configured patterns, which it cannot analyse. Its output
equals ``redact`` of the whole text, whatever the split (configured patterns:
as long as a match is shorter than ``window``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import TypeVar

_T = TypeVar("_T")

_TOKEN = r"[A-Za-z0-9_\-]"
_ASSIGN: tuple[tuple[str, int, int | None], ...] = (
    ("[\"']", 0, 1), (r"\s", 0, 8), ("[:=]", 1, 1), (r"\s", 0, 8), ("[\"']", 0, 1),
)
MIN_SECRET_VALUE = 8
"""Exact secret values shorter than this are ignored: a short value ("dev",
"1234") would be redacted inside ordinary words and numbers."""
SMALL_TEXT = 4096
"""A text up to this size is first searched for any anchor at all (in one
pass over its lowercased form); the shapes run only when one is there. A
larger text always runs every shape, so a trigger word costs a large text
nothing extra (no cliff); a small one costs microseconds either way."""
ASYNC_INLINE = 16 * 1024
"""``redact_async`` takes a text up to this size in one step when it holds
no secret's opening at all (one prefilter pass: microseconds); larger
ones, and ones that hold an opening, pass by pass (``sliced``)."""
INLINE_ANY = 1024
"""``redact_async`` redacts a text up to this size in one step whatever it
holds: crafted text dense with openings (``AKIAAKIA…``) costs ~0.7 ms here."""
SLICE_S = 0.001
"""``sliced`` gives the event loop a turn whenever it has worked this long:
the work stays on the loop's own thread (a worker thread would hold the
interpreter lock for up to its 5 ms switch interval at a time), in steps
of a millisecond or so."""


class Turns:
    """The event loop's turns across a sequence of steps, each short alone,
    that add up (a result's many data blocks, a megabyte's passes): one is
    due whenever the work since the last has held the loop ``SLICE_S``."""

    __slots__ = ("mark",)

    def __init__(self) -> None:
        self.mark = time.perf_counter()

    def due(self) -> bool:
        return time.perf_counter() - self.mark >= SLICE_S

    async def take(self) -> None:
        """A turn, if one is due."""
        if self.due():
            await asyncio.sleep(0)
            self.mark = time.perf_counter()


async def sliced(steps: Iterable[_T]) -> list[_T]:
    """Every item of ``steps`` (a generator doing work between its items),
    the event loop given a turn whenever the work has held it ``SLICE_S``."""
    out: list[_T] = []
    turns = Turns()
    for step in steps:
        out.append(step)
        if turns.due():
            await turns.take()
    return out


async def _let_go(chunks: list[_T]) -> None:
    """Free ``chunks`` (a step's spans each) one at a time, the event loop
    given a turn whenever that has held it ``SLICE_S``: a million spans of
    a text dense with secrets, freed at once, hold the loop longer (12 ms)
    than any step that found them."""
    turns = Turns()
    while chunks:
        chunks.pop()
        if turns.due():
            await turns.take()


CUT_TAIL = 4096
"""How far past its cut a long text is shaped: a secret or a personal datum
the shaped window's end halves, shorter than this, stays past the cut."""


def shaped_within(text: str, limit: int, shape: Callable[[str], str]) -> str:
    """``shape(text)`` cut to ``limit`` characters (then ``…``), shaping no
    more of a long text than it needs (a decision's detail, a refusal
    quoting megabytes): a window of it ending where a word does (a token
    such as a JWT is never halved by it), widened until what it shapes to
    reaches ``CUT_TAIL`` past the cut, so that a secret shaped whole is never
    halved and no part of one is kept unshaped."""
    if len(text) <= limit:
        return shape(text)
    reach = limit
    while True:
        end = limit + CUT_TAIL + reach
        if end < len(text) and not text[end - 1].isspace():  # ends where a word does: no token halved
            space = _SPACE.search(text, end, end + TOKEN_REACH)
            if space is None:  # a token longer than that runs through: none of it is kept
                return _before_token(text, limit, shape)
            end = space.start()
        shown = shape(text[:end])
        if end >= len(text) or len(shown) >= limit + CUT_TAIL:
            break
        reach *= 2
    return shown[:limit] + "…" if len(shown) > limit else shown


_SPACE = re.compile(r"\s")
TOKEN_REACH = 65_536
"""How far ``shaped_within`` looks for the end of a word its window ends in."""


def _before_token(text: str, limit: int, shape: Callable[[str], str]) -> str:
    """What a text cut inside a token longer than ``TOKEN_REACH`` keeps:
    what stands before the token's last word break within ``limit``, shaped,
    less its last ``SPACED_DATUM`` characters (a datum with spaces in it, a
    phone number, halved at that break stays out), then ``…``."""
    breaks = [m.start() for m in _SPACE.finditer(text, max(limit - TOKEN_REACH, 0), limit)]
    if not breaks:
        return "…"
    shown = shape(text[:breaks[-1]])
    return shown[: max(len(shown) - SPACED_DATUM, 0)] + "…"


SPACED_DATUM = 320
"""The longest datum with spaces in it a detector recognises (an address)."""


def _opening_of(words: Iterable[str]) -> str:
    """The longest opening every one of ``words`` starts with."""
    first, *rest = sorted(words)
    last = rest[-1] if rest else first
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


_FOLD_FIX = "\u0130"  # the one character whose lowercase is two characters


def _fold(text: str) -> str:
    """Lowercase with the same length, so positions carry over."""
    if _FOLD_FIX in text:
        text = text.replace(_FOLD_FIX, "i")
    return text.lower()


@dataclass(frozen=True)
class _Shape:
    """One kind of secret: ``anchors`` (literals; lowercase when ``folded``,
    then matched on the lowercased text) followed by ``items`` (class, min,
    max). No boundary before the anchor: a key glued to other text (another
    key, an identifier) is still a key, and a false positive costs less
    than a leak."""

    label: str
    anchors: tuple[str, ...]
    items: tuple[tuple[str, int, int | None], ...]
    folded: bool = False
    within: str = ""
    """The label of a shape each match of this one also matches, with the
    same span: a batch search finds that shape only and names a match by
    this one where it also matches (one pass instead of two)."""

    def opening(self) -> str:
        """The anchors as a regex, their shared opening written once: ``re``
        finds a literal opening with its fast search (an alternation of
        literals with none would be tried at every position)."""
        common = _opening_of(self.anchors)
        rests = sorted((a[len(common):] for a in self.anchors), key=len, reverse=True)
        alternation = "|".join(re.escape(r) for r in rests)
        return re.escape(common) + (f"(?:{alternation})" if any(rests) else "")

    def pattern(self) -> str:
        body = "".join(f"{cls}{{{lo},{'' if hi is None else hi}}}" for cls, lo, hi in self.items)
        return self.opening() + body


SHAPES: tuple[_Shape, ...] = (
    _Shape("anthropic_key", ("sk-ant-",), ((_TOKEN, 20, None),), within="openai_key"),
    _Shape("openai_key", ("sk-",), ((_TOKEN, 20, None),)),
    _Shape(
        "stripe_key",
        tuple(f"{a}_{b}_" for a in ("sk", "rk", "pk") for b in ("live", "test")),
        (("[A-Za-z0-9]", 16, None),),
    ),
    _Shape("aws_access_key", ("AKIA", "ASIA"), (("[0-9A-Z]", 16, 16),)),
    # a key id and its secret side by side (a console credentials CSV, a
    # "id secret" line, or glued, as two text blocks of one answer stream):
    # the secret carries no label of its own
    _Shape(
        "aws_secret_key", ("AKIA", "ASIA"),
        (("[0-9A-Z]", 16, 16), ("[\\s,;:|\"'=]", 0, 8), ("[A-Za-z0-9/+]", 40, 40)),
    ),
    _Shape(
        "github_token", tuple(f"gh{c}_" for c in "pousr"), (("[A-Za-z0-9]", 30, None),),
    ),
    _Shape("github_token", ("github_pat_",), (("[A-Za-z0-9_]", 22, None),)),
    _Shape("google_api_key", ("AIza",), ((r"[0-9A-Za-z_\-]", 35, 35),)),
    # bot, user, legacy, refresh and app-level tokens (the rotating ``xoxe.xoxp-…`` is read from
    # its ``xoxp-``); one pass: ``x`` is rare in prose
    _Shape(
        "slack_token", (*(f"xox{c}-" for c in "abposre"), "xapp-"), ((r"[A-Za-z0-9\-]", 10, None),),
    ),
    _Shape(
        "jwt", ("eyJ",),
        ((_TOKEN, 4, None), (r"\.", 1, 1), (_TOKEN, 4, None), (r"\.", 1, 1), (_TOKEN, 0, None)),
    ),
    _Shape(
        "bearer_token", ("bearer",),
        ((r"\s", 1, 8), (r"[a-z0-9._~+/\-]", 16, None), ("=", 0, None)), folded=True,
    ),
    _Shape(
        "aws_secret_key", ("secret_access_key", "secret-access-key", "secretaccesskey"),
        (*_ASSIGN, ("[a-z0-9/+]", 40, 40)), folded=True,
    ),
    # one shape per opening, each found with a literal search; a value may
    # hold another label ("api_key=…secret=…"): each is redacted
    *(
        _Shape("api_key_assignment", anchors, (*_ASSIGN, (r"[a-z0-9_\-./+]", 12, None)), folded=True)
        for anchors in (
            tuple(f"{word}{sep}{tail}" for word, tail in (("api", "key"), ("access", "token"), ("auth", "token")) for sep in ("_", "-", "")),
            ("secret",),
            ("password", "passwd"),
        )
    ),
)
"""The built-in secrets (private-key blocks are found separately)."""

_BEGIN = "-----BEGIN "
_END = "-----END "
_KEY_LINE = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_HEADER = re.compile(re.escape(_BEGIN) + _KEY_LINE)
_FOOTER = re.compile(re.escape(_END) + _KEY_LINE)
_LINE_MAX = len(_BEGIN) + 40 + len("PRIVATE KEY BLOCK-----")
"""The longest header or END line: a shorter remainder may still become one."""
_PRIVATE_KEY = "[redacted:private_key]"
_CONTEXT = 8
"""Characters kept before a stream's unsent text: the anchors' lookbehind."""


def _footer(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the first private-key END line after ``start`` ends, as
    ``(found, resume)``: ``found`` -1 while none is there yet; ``resume`` is
    where a later search (with more text) must start again."""
    pos = start
    while True:
        at = text.find(_END, pos, end)
        if at < 0:
            return -1, max(start, end - len(_END) + 1)
        line = _FOOTER.match(text, at, end)
        if line is not None:
            return line.end(), line.end()
        if _may_become_footer(text, at, end):
            return -1, at
        pos = at + 1


_KEY_WORDS = re.compile(r"[A-Z0-9 ]*")


def _may_become_footer(text: str, at: int, end: int) -> bool:
    """Whether ``text[at:end]``, an END line's opening cut by ``end``, can
    still become a whole END line with more text (``-----END -----END RSA…``
    cannot: the first one is not an END line, and the second is searched)."""
    if end - at >= _LINE_MAX:
        return False
    words = _KEY_WORDS.match(text, at + len(_END), end)
    stop = words.end() if words is not None else at + len(_END)
    if stop == end:
        return True  # the key type may still be written
    dashes = end - stop  # the closing dashes begun: fewer than five, nothing else
    named = text[at + len(_END):stop].endswith(("PRIVATE KEY", "PRIVATE KEY BLOCK"))
    return named and dashes < 5 and text.count("-", stop, end) == dashes


STEP_HITS = 512
"""A per-anchor loop hands over its work this many anchors at a step (well
under a millisecond), so text dense with anchors is not one long step."""
_GLUE_STEP = 128
"""A pass's matches are checked for glued secrets (up to a few attempts
each) this many at a step."""
_FOOTER_PIECE = 16 * 1024
"""An open key block's END line is searched for this much text at a step."""


def _key_blocks(text: str, pos: int, end: int) -> Iterator[list[tuple[int, int, str]]]:
    """Private-key blocks: header to END line, or to ``end`` when none; a
    step per ``STEP_HITS`` headers and per ``_FOOTER_PIECE`` searched."""
    found: list[tuple[int, int, str]] = []
    hits = 0
    while pos < end:
        at, pos = _window_find(text, _BEGIN, pos, end)
        if at < 0:
            yield found
            found = []
            continue
        hits += 1
        if hits % STEP_HITS == 0:
            yield found
            found = []
        header = _HEADER.match(text, at, end)
        if header is None:
            pos = at + 1
            continue
        close, look = -1, header.end()
        while close < 0 and look < end:
            piece = min(end, look + _FOOTER_PIECE)
            close, look = _footer(text, look, piece)
            if close < 0 and piece < end:
                yield found
                found = []
            elif close < 0:
                break
        if close < 0:
            found.append((at, end, _PRIVATE_KEY))
            break
        found.append((at, close, _PRIVATE_KEY))
        pos = close
    yield found


def _self_overlapping(shape: _Shape) -> tuple[str, re.Pattern[str], re.Pattern[str]] | None:
    """For a shape whose anchor is made of its first run's characters and
    that needs more after that run (a JWT: ``eyJ`` is token text), the
    anchor, the first run and the second item: a failed attempt there fails
    again at every anchor inside the same run, and scanning each would be
    quadratic."""
    cls, _, hi = shape.items[0]
    if hi is not None or len(shape.items) < 2:
        return None
    if not all(re.fullmatch(cls, ch) for a in shape.anchors for ch in a):
        return None
    if len(shape.anchors) != 1 or shape.items[1][1] < 1:
        raise ValueError(f"{shape.label}: a self-overlapping shape has one anchor and a required second item")
    return shape.anchors[0], re.compile(f"{cls}*"), re.compile(shape.items[1][0])


def _one_run(shape: _Shape) -> bool:
    """A shape that is its anchor and one unbounded run of characters the
    anchor is made of (``xoxb-`` then ``[A-Za-z0-9-]+``): a later anchor
    inside a match's run is covered by it (``xoxe-xoxe-…``, one token)."""
    if len(shape.items) != 1:
        return False
    cls, _, hi = shape.items[0]
    return hi is None and all(re.fullmatch(cls, ch) for a in shape.anchors for ch in a)


def _window_find(text: str, literal: str, pos: int, end: int) -> tuple[int, int]:
    """``text.find(literal, pos, end)`` reading at most ``WINDOW`` characters:
    ``(at, pos)`` when found; ``(-1, resume)`` when not in this window
    (``resume`` ``end``: not at all)."""
    stop = min(end, pos + WINDOW)
    at = text.find(literal, pos, min(end, stop + len(literal) - 1))
    if at >= 0:
        return at, pos
    return -1, (end if stop >= end else stop)


def _skipping(
    regex: re.Pattern[str], skip: tuple[str, re.Pattern[str], re.Pattern[str]],
    text: str, pos: int, end: int,
) -> Iterator[list[tuple[int, int]]]:
    """``regex.finditer`` for a self-overlapping shape, in linear time: after
    a failed attempt, anchors inside the same first run are skipped (each
    would reach the same end of that run, and fail the same way). The anchor
    is found with ``str.find``, which skips on its last character (``re``
    stops at every ``e`` of English for ``eyJ``). The matches come a step
    per ``WINDOW`` of text read or ``STEP_HITS`` anchors, so crafted text
    is not one long step."""
    anchor, run, second = skip
    out: list[tuple[int, int]] = []
    mark, hits = pos, 0
    while pos < end:
        at, pos = _window_find(text, anchor, pos, end)
        if at < 0:
            yield out
            out, mark = [], pos
            continue
        hits += 1
        # the classes are disjoint: an attempt's first run ends where the
        # run ends, so it can only match when the second item follows there
        stop = at + len(anchor)
        while (piece := min(end, stop + WINDOW)) > stop:
            stop = run.match(text, stop, piece).end()  # type: ignore[union-attr]  # ``cls*`` always matches
            if stop < piece:
                break
            yield out  # a crafted run: a step per window of it
            out, mark = [], stop
        m = regex.match(text, at, end) if second.match(text, stop, end) else None
        if m is not None:
            out.append((at, m.end()))
            pos = m.end() if m.end() > at else at + 1
        else:
            pos = max(at + 1, stop)
        if pos - mark >= WINDOW or hits % STEP_HITS == 0:
            yield out
            out, mark = [], pos
    yield out


def _led(shape: _Shape) -> tuple[frozenset[str], re.Pattern[str], int] | None:
    """For a shape whose anchors share no opening but are every one of a few
    first characters followed by every one of a few tails (``sk_live_``,
    ``rk_test_``...): the first characters and the tails as a regex, which
    ``re`` finds with its fast literal search (an alternation of the whole
    anchors would be tried at every position), and the longest tail."""
    if _opening_of(shape.anchors):
        return None
    leads = frozenset(a[0] for a in shape.anchors)
    tails = {a[1:] for a in shape.anchors}
    if {lead + tail for lead in leads for tail in tails} != set(shape.anchors):
        raise ValueError(f"{shape.label}: its anchors need a shared opening or a shared tail")
    return leads, re.compile(_Shape(shape.label, tuple(tails), ()).opening()), max(map(len, tails))


def _at_leads(
    regex: re.Pattern[str], led: tuple[frozenset[str], re.Pattern[str], int],
    text: str, pos: int, end: int,
) -> Iterator[list[tuple[int, int]]]:
    """``regex.finditer`` for a led shape: its tails found by a literal
    search, the shape tried one character before each, ``STEP_HITS`` tails
    at a step. Equal as long as no match can start inside another (a stripe
    key's value has no ``_``)."""
    leads, tails, longest = led
    out: list[tuple[int, int]] = []
    done, hits = pos, 0
    for window in range(pos + 1, max(end, pos + 1), WINDOW):  # a tail starting in each window
        stop = min(end, window + WINDOW)
        for t in tails.finditer(text, window, min(end, stop + longest)):
            if t.start() >= stop:
                break
            hits += 1
            at = t.start() - 1
            if at >= done and text[at] in leads and (m := regex.match(text, at, end)) is not None:
                out.append((at, m.end()))
                done = m.end()
            if hits % STEP_HITS == 0:
                yield out
                out = []
        yield out
        out = []
    yield out


def _by_start(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``spans`` by start, the longest first (two stable sorts in C)."""
    spans.sort(key=itemgetter(1), reverse=True)
    spans.sort(key=itemgetter(0))
    return spans


def _merging(steps: list[list[tuple[int, int, str]]], step: int = 1024) -> Iterator[list[tuple[int, int, str]]]:
    """The spans of ``steps`` with overlapping ones joined, the first
    (longest) one naming the result; ``step`` spans read at a step. Each
    step's spans are sorted on their own (a few hundred at most) and then
    merged lazily, so tens of thousands of secrets are never one sort. A
    step that goes on where the run before it ends (a pattern's next
    steps, in order) extends that run: the merge's heap holds a run per
    pattern, not one per step (thousands, for text dense with secrets, set
    up in one step of the loop)."""
    runs: list[list[list[tuple[int, int, str]]]] = []  # each run: steps in order, read as one
    sorted_since = 0
    for spans in steps:
        if spans:
            spans = _by_start(spans)
            last = runs[-1][-1][-1] if runs else None
            if last is not None and (spans[0][0], -spans[0][1]) >= (last[0], -last[1]):
                runs[-1].append(spans)
            else:
                runs.append([spans])
            sorted_since += len(spans)
            if sorted_since >= step:
                yield []
                sorted_since = 0
    if len(runs) < 2:  # the common case: no heap
        ordered: Iterable[tuple[int, int, str]] = itertools.chain.from_iterable(runs[0]) if runs else ()
    else:
        ordered = heapq.merge(*map(itertools.chain.from_iterable, runs), key=lambda s: (s[0], -s[1]))
    merged: list[tuple[int, int, str]] = []
    for n, (start, end, label) in enumerate(ordered, 1):
        if merged and start < merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end, merged[-1][2])
        else:
            merged.append((start, end, label))
        if n % step == 0:
            yield merged[:-1]  # the last may still grow
            merged = merged[-1:]
    yield merged


MATCHES_AT_A_STEP = 512
"""Matches of a configured pattern (or the secret values) taken in one step:
a text dense in them (a value repeated over megabytes) is found a step at a
time, the loop given turns between (``sliced``)."""


def _matched(pattern: re.Pattern[str], text: str, pos: int, end: int, tag: str) -> Iterator[list[tuple[int, int, str]]]:
    """``pattern``'s non-empty matches in ``text[pos:end]`` as spans tagged
    ``tag``, ``MATCHES_AT_A_STEP`` at a step."""
    spans: list[tuple[int, int, str]] = []
    for m in pattern.finditer(text, pos, end):
        if m.end() > m.start():
            spans.append((m.start(), m.end(), tag))
            if len(spans) >= MATCHES_AT_A_STEP:
                yield spans
                spans = []
    yield spans


def _values_found(
    values: re.Pattern[str], longest: int, text: str, pos: int, end: int,
) -> Iterator[list[tuple[int, int, str]]]:
    """The secret values (``values``: their alternation, longest first, none
    longer than ``longest``) in ``text[pos:end]``, a ``WINDOW`` at a step:
    a value matches on its own characters only, so a window read
    ``longest`` past its end finds what one search would (a text of near
    misses, every position a value's opening, is one long search otherwise)."""
    at = pos
    while at < end:
        stop = min(end, at + WINDOW)
        spans, after = [], stop
        for m in values.finditer(text, at, min(end, stop + longest)):
            if m.start() >= stop:
                break
            spans.append((m.start(), m.end(), "[redacted:secret_value]"))
            after = max(after, m.end())
        yield spans
        at = after


def _merge(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans joined; the first (longest) one names the result."""
    return [span for step in _merging([spans]) for span in step]


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans as one: a chain of overlapping secrets ("AKIAAKIA…")
    is one span to hold back from, not one per link, so each delta of a
    stream costs what it adds."""
    if len(spans) < 2:
        return spans
    out: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((start, stop))
    return out


def _applying(
    text: str, pos: int, end: int, steps: list[list[tuple[int, int, str]]],
) -> Iterator[str]:
    """``text[pos:end]`` with the spans of ``steps`` (merged, in order)
    replaced by their labels, a step's worth at a time."""
    for spans in steps:
        out: list[str] = []
        for start, stop, label in spans:
            out += [text[pos:start], label]
            pos = stop
        yield "".join(out)
    yield text[pos:end]


def _apply(text: str, pos: int, end: int, spans: list[tuple[int, int, str]]) -> str:
    return "".join(_applying(text, pos, end, [spans]))


WINDOW = 64 * 1024
"""A pass over a larger text searches it this many characters at a call
(a tenth of a millisecond of prose, a millisecond and a half of crafted
text that starts an attempt at every character), so the event loop's turns
come often."""


def _reach(shape: _Shape) -> int | None:
    """How far past its start an attempt of ``shape`` reads before its
    outcome is decided (a final run's length aside); None when a run of no
    bound is followed by something required (a JWT's ``.``)."""
    reach = max(len(a) for a in shape.anchors)
    for i, (_, lo, hi) in enumerate(shape.items):
        if hi is None and any(later_lo > 0 for _, later_lo, _ in shape.items[i + 1:]):
            return None
        reach += lo if hi is None else hi
    return reach


def _windowed(
    regex: re.Pattern[str], reach: int, source: str, pos: int, end: int, window: int | None = None,
) -> Iterator[list[tuple[int, int]]]:
    """``regex.finditer`` over ``source[pos:end]`` one window at a time,
    with the same matches: an attempt that starts ``reach`` or more before
    a window's end is decided inside it; one cut by the window's end is
    matched again on the whole text; the rest is searched again with the
    next window (``window`` must exceed ``reach``)."""
    window = WINDOW if window is None else window
    if window <= reach:
        raise ValueError("a window must be longer than the reach of the shape")
    while pos < end:
        stop = min(end, pos + window)
        settled = stop if stop == end else stop - reach
        found: list[tuple[int, int]] = []
        for m in regex.finditer(source, pos, stop):
            if m.start() >= settled:
                break
            if m.end() == stop < end:  # its last run may go on past the window
                m = regex.match(source, m.start(), end)  # type: ignore[assignment]
                assert m is not None
            found.append(m.span())
            if m.end() >= stop:
                break
        yield found
        pos = max(found[-1][1] if found else pos, settled)


class _Compiled:
    """One shape compiled once per ``Redactor``, for both searches: its
    pattern and opening, its self-overlap (``_self_overlapping``) and the
    automaton a stream steps it with."""

    __slots__ = ("automaton", "one_run", "opening", "regex", "shape", "skip")

    def __init__(self, shape: _Shape) -> None:
        self.shape = shape
        self.regex = re.compile(shape.pattern())
        self.opening = re.compile(shape.opening())
        self.skip = _self_overlapping(shape)
        self.one_run = self.skip is not None or _one_run(shape)
        """A later anchor inside a live match's first run ends where it ends:
        a stream steps the earlier one only."""
        self.automaton = _Automaton(shape)


class _Pass:
    """One shape's batch search: ``finditer``'s matches, found the fastest
    way the shape allows (a literal opening: ``re``'s own search, a window at
    a time on a large text; a shared tail: ``_at_leads``; self-overlapping:
    ``_skipping``), plus the glued ones ``finditer`` skips (``_glued``),
    named by the shapes found within it."""

    def __init__(self, compiled: _Compiled, within: list[_Compiled]) -> None:
        shape = compiled.shape
        self.folded = shape.folded
        self.regex, self.anchor, self.skip = compiled.regex, compiled.opening, compiled.skip
        self.label = f"[redacted:{shape.label}]"
        self.led = _led(shape)
        self.reach = _reach(shape)
        self.inner = [(c.regex, f"[redacted:{c.shape.label}]") for c in within]

    def steps(self, source: str, pos: int, end: int) -> Iterator[list[tuple[int, int, str]]]:
        """The secrets in ``source[pos:end]``, a window (or the pass) at a step."""
        if self.skip is not None:
            found = _skipping(self.regex, self.skip, source, pos, end)
        elif self.led is not None:
            found = _at_leads(self.regex, self.led, source, pos, end)
        elif end - pos <= WINDOW or self.reach is None:
            found = iter([[m.span() for m in self.regex.finditer(source, pos, end)]])
        else:
            found = _windowed(self.regex, self.reach, source, pos, end)
        for spans in found:
            for first in range(0, len(spans), _GLUE_STEP):  # text dense with secrets: a step per hundred
                yield self._named(source, self._glued(source, spans[first:first + _GLUE_STEP], end), end)
            if not spans:
                yield []

    def _glued(self, source: str, found: list[tuple[int, int]], end: int) -> list[tuple[int, int]]:
        """``found`` and the secrets starting inside one of them that reach
        past its end (``secret=…secret=…``, ``sk_live_…sk_live_…``): a match
        skips the anchors inside it. Only the last ``reach`` characters of a
        match can hold one (earlier, its last run would end where the
        match's does), so this costs a few attempts a match."""
        if self.reach is None or not found:
            return found
        glued = list(found)
        for start, stop in found:
            at = max(start + 1, stop - self.reach)
            # an anchor starting inside may end past the match (``sk`` + ``_live_``)
            while (a := self.anchor.search(source, at, min(end, stop + self.reach))) is not None and a.start() < stop:
                m = self.regex.match(source, a.start(), end)
                if m is not None and m.end() > stop:
                    glued.append((a.start(), m.end()))
                at = a.start() + 1
        return glued

    def _named(self, source: str, found: list[tuple[int, int]], end: int) -> list[tuple[int, int, str]]:
        if not self.inner:
            label = self.label
            return [(s, e, label) for s, e in found]
        return [(s, e, self._name(source, s, e, end)) for s, e in found]

    def _name(self, source: str, start: int, stop: int, end: int) -> str:
        for regex, label in self.inner:
            m = regex.match(source, start, end)
            if m is not None and m.end() == stop:
                return label
        return self.label


class Redactor:
    """Finds and replaces secrets: the built-in shapes, private-key blocks,
    exact secret values and the configured patterns. Compiled once per
    Harness."""

    def __init__(
        self,
        extra_patterns: Iterable[str] = (),
        window: int = 128,
        secret_values: Iterable[str] = (),
    ) -> None:
        self._compiled = [_Compiled(s) for s in SHAPES]  # indexed as SHAPES (a stream's kinds)
        self._extra = [re.compile(p) for p in extra_patterns]
        self._passes = [
            _Pass(c, [inner for inner in self._compiled if inner.shape.within == c.shape.label])
            for c in self._compiled if not c.shape.within
        ]
        self._any_anchor = re.compile("|".join(
            re.escape(a) for a in sorted({a.lower() for s in SHAPES for a in s.anchors}, key=len, reverse=True)
        ))
        self._values: list[str] = []
        self._values_re: re.Pattern[str] | None = None
        self._heads: re.Pattern[str] | None = None
        self._openings: frozenset[str] = frozenset()
        """Every beginning of what a secret begins with, lowercased: a
        stream's tail that is one of them may still become a secret (a set,
        so a stream's check is a lookup per tail length, not a scan)."""
        self._open_to(a.lower() for s in SHAPES for a in s.anchors)
        self._open_to([_BEGIN.lower()])
        self.learn(secret_values)
        longest = max(len(a) for s in SHAPES for a in s.anchors)
        self.window = max(window, longest, MIN_SECRET_VALUE, len(_BEGIN))
        self._longest_anchor = max(longest, len(_BEGIN), MIN_SECRET_VALUE)

    def learn(self, secret_values: Iterable[str]) -> None:
        """Exact secret values redacted from now on, beside those known
        (every holder of this redactor, streams in flight included, sees them)."""
        values = set(self._values)
        for value in secret_values:
            if not value or not value.strip():
                raise ValueError("secret_values: an empty or blank value would match everywhere")
            if len(value) >= MIN_SECRET_VALUE:
                values.add(value)
        if len(values) == len(self._values):
            return
        ordered = sorted(values, key=len, reverse=True)
        self._heads = re.compile("|".join(sorted({re.escape(v[:MIN_SECRET_VALUE]) for v in ordered})))
        self._open_to(v[:MIN_SECRET_VALUE].lower() for v in ordered)
        self._values_re = re.compile("|".join(map(re.escape, ordered)))
        self._values = ordered

    def _open_to(self, openings: Iterable[str]) -> None:
        self._openings |= {o[:n] for o in openings for n in range(1, len(o) + 1)}

    def _steps(
        self, text: str, pos: int, end: int, folded: str | None = None,
    ) -> Iterator[list[tuple[int, int, str]]]:
        """The secrets in ``text[pos:end]`` (``text`` before ``pos`` is
        context), one pass over the text at a time."""
        yield from _key_blocks(text, pos, end)
        passes = self._passes
        if end - pos <= SMALL_TEXT:
            folded = _fold(text) if folded is None else folded
            if self._any_anchor.search(folded, pos, end) is None:
                passes = []
        for one in passes:
            if one.folded and folded is None:
                pieces = []
                for at in range(0, len(text), WINDOW):  # lowercasing is per character
                    pieces.append(_fold(text[at:at + WINDOW]))
                    yield []
                folded = "".join(pieces)
            yield from one.steps(folded if one.folded and folded is not None else text, pos, end)
        if self._values_re is not None:
            yield from _values_found(self._values_re, len(self._values[0]), text, pos, end)
        for pattern in self._extra:
            yield from _matched(pattern, text, pos, end, "[redacted:pattern]")

    def _find(self, text: str, pos: int, end: int, folded: str | None = None) -> list[tuple[int, int, str]]:
        """Every secret in ``text[pos:end]`` (``text`` before ``pos`` is context)."""
        if end - pos <= SMALL_TEXT and self._quiet(text, pos, end, folded):
            return []
        spans = [span for step in self._steps(text, pos, end, folded) for span in step]
        return _merge(spans) if spans else spans

    def _quiet(self, text: str, pos: int, end: int, folded: str | None) -> bool:
        """A small text with no secret's opening at all (most texts of a
        reply: names, short results, deltas): what ``_steps`` would find,
        nothing, decided in a few C calls."""
        if self._values_re is not None or self._extra or text.find(_BEGIN, pos, end) >= 0:
            return False
        return self._any_anchor.search(_fold(text) if folded is None else folded, pos, end) is None

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted:<kind>]``."""
        spans = self._find(text, 0, len(text))
        return _apply(text, 0, len(text), spans) if spans else text

    async def redact_async(self, text: str, inline: int = ASYNC_INLINE) -> str:
        """``redact(text)``; a text longer than ``INLINE_ANY`` characters
        that may hold a secret (any longer than ``inline`` does) is
        redacted one pass at a time, the event loop given a turn whenever
        the work has held it for ``SLICE_S`` (``sliced``), so even a large
        or adversarial result never holds the loop for long."""
        if len(text) <= INLINE_ANY:
            return self.redact(text)
        if len(text) <= inline and self._quiet(text, 0, len(text), None):
            return text
        steps = await sliced(self._steps(text, 0, len(text)))
        merged = await sliced(_merging(steps))
        await _let_go(steps)
        if not any(merged):
            return text
        shown = "".join(await sliced(_applying(text, 0, len(text), merged)))
        await _let_go(merged)
        return shown

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets in ``text`` are (overlapping ones joined)."""
        return [(s, e) for s, e, _ in self._find(text, 0, len(text))]

    def stream(self) -> StreamRedactor:
        """A redactor for one stream of text deltas."""
        return StreamRedactor(self)


# ------------------------------------------------------------------ streams


class _Automaton:
    """Steps a shape's items over text, one state set at a time; a long run
    of one class is crossed with a single regex call (linear feeding)."""

    def __init__(self, shape: _Shape) -> None:
        self.items = shape.items
        self.single = [re.compile(cls) for cls, _, _ in shape.items]
        self.run = [re.compile(f"{cls}*") for cls, _, _ in shape.items]

    def _closure(self, states: set[tuple[int, int]]) -> set[tuple[int, int]]:
        out, todo = set(states), list(states)
        while todo:
            i, n = todo.pop()
            if i < len(self.items) and n >= self.items[i][1] and (i + 1, 0) not in out:
                out.add((i + 1, 0))
                todo.append((i + 1, 0))
        return out

    def advance(self, states: set[tuple[int, int]], text: str, pos: int, end: int) -> set[tuple[int, int]]:
        """The states after reading ``text[pos:end]`` (empty: no secret of
        this shape can continue there)."""
        while pos < end and states:
            if len(states) == 1:
                (i, n), = states
                if self.items[i][2] is None and n >= self.items[i][1]:
                    # a run: its class is disjoint from the next item's
                    stop = self.run[i].match(text, pos, end)
                    if stop is not None and stop.end() > pos:
                        pos = stop.end()
                        continue
            char = text[pos]
            nxt: set[tuple[int, int]] = set()
            for i, n in self._closure(states):
                if i == len(self.items):
                    continue
                lo, hi = self.items[i][1], self.items[i][2]
                if (hi is None or n < hi) and self.single[i].match(char):
                    nxt.add((i, n + 1 if hi is not None or n < lo else n))
            states = nxt
            pos += 1
        return states


class _Candidate:
    """An anchor seen in a stream whose text may still become a secret.
    ``kind``: a shape's index, or ``_BLOCK`` / ``_VALUE``; ``states``: the
    shape's automaton states at ``pos`` (a block: empty once its header is read)."""

    __slots__ = ("kind", "pos", "start", "states")

    def __init__(self, start: int, kind: int, pos: int) -> None:
        self.start, self.kind, self.pos = start, kind, pos
        self.states: set[tuple[int, int]] = {(0, 0)}


_BLOCK, _VALUE = -1, -2
_HEADER_SO_FAR = re.compile(r"[A-Z0-9 \-]*")



class StreamRedactor:
    """Redacts a text that arrives in pieces. Holds back everything from the
    first anchor that may still become a secret, and the last ``window``
    characters; sends the rest redacted exactly as ``Redactor.redact`` would
    redact the whole text. Every character is searched once and stepped a
    bounded number of times: feeding costs what the text costs."""

    def __init__(self, redactor: Redactor) -> None:
        self._r = redactor
        self._buf = ""  # context (already sent) + unsent text
        self._low = ""  # _buf lowercased, for the folded shapes
        self._off = 0  # absolute position of _buf[0]
        self._sent = 0  # absolute position up to which text was sent
        self._seen = 0  # absolute position up to which anchors were searched
        self._live: list[_Candidate] = []
        self._settled: list[tuple[int, int]] = []
        # compiled once per Redactor: a stream is opened for every model call
        self._compiled = redactor._compiled
        self._heads = redactor._heads
        self._longest = redactor._longest_anchor
        # the configured patterns cannot be analysed: their window is held
        # back; otherwise only a tail that may be the start of an anchor
        self._hold_back = redactor.window if redactor._extra else redactor._longest_anchor

    def _discover(self, end: int) -> None:
        """Start a candidate at every anchor that ends in the new text."""
        off, seen = self._off, self._seen
        lo, stop = max(seen - self._longest + 1, self._sent, off) - off, end - off
        found: list[_Candidate] = []
        anchored = self._r._any_anchor.search(self._low, lo, stop) is not None
        for kind, compiled in enumerate(self._compiled):
            if not anchored:
                break
            text = self._low if compiled.shape.folded else self._buf
            at = lo
            while (m := compiled.opening.search(text, at, stop)) is not None:  # overlapping ones too: AKIASIA…
                if m.end() + off > seen:
                    found.append(_Candidate(m.start() + off, kind, m.end() + off))
                at = m.start() + 1
        at = lo
        while (at := self._buf.find(_BEGIN, at, stop)) >= 0:
            if at + len(_BEGIN) + off > seen:
                found.append(_Candidate(at + off, _BLOCK, at + off))
            at += 1
        if self._heads is not None:
            at = lo
            while (m := self._heads.search(self._buf, at, stop)) is not None:
                if m.end() + off > seen:
                    found.append(_Candidate(m.start() + off, _VALUE, m.start() + off))
                at = m.start() + 1
        self._live += sorted(found, key=lambda c: c.start)
        self._seen = end

    def _step(self, cand: _Candidate, end: int) -> tuple[int, int] | bool | None:
        """Advance a candidate to ``end``: True while it may still become a
        secret; else its settled span, or None when there is no secret."""
        rel, stop = cand.start - self._off, end - self._off
        if cand.kind == _BLOCK:
            return self._step_block(cand, rel, stop)
        if cand.kind == _VALUE:
            piece = self._buf[rel:stop]
            if any(len(v) > len(piece) and v.startswith(piece) for v in self._r._values):
                return True
            regex = self._r._values_re
            m = regex.match(self._buf, rel, stop) if regex is not None else None
            return (cand.start, m.end() + self._off) if m else None
        compiled = self._compiled[cand.kind]
        text = self._low if compiled.shape.folded else self._buf
        cand.states = compiled.automaton.advance(cand.states, text, cand.pos - self._off, stop)
        cand.pos = end
        if cand.states:
            return True
        m = compiled.regex.match(text, rel, stop)
        return (cand.start, m.end() + self._off) if m else None

    def _step_block(self, cand: _Candidate, rel: int, stop: int) -> tuple[int, int] | bool | None:
        """A key block: an undecided header, then open until its END line."""
        buf = self._buf
        if cand.states:
            header = _HEADER.match(buf, rel, stop)
            if header is None:
                so_far = _HEADER_SO_FAR.match(buf, rel + len(_BEGIN), stop)
                undecided = so_far is not None and so_far.end() == stop and stop - rel < _LINE_MAX
                return True if undecided else None
            cand.states = set()
            cand.pos = header.end() + self._off
        close, resume = _footer(buf, cand.pos - self._off, stop)
        if close >= 0:
            return (cand.start, close + self._off)
        cand.pos = resume + self._off
        return True

    def feed(self, delta: str) -> str:
        """Add a delta; the redacted text that is now safe to send."""
        if not delta:
            return ""
        if not isinstance(delta, str):  # refused before the held text is taken out
            raise TypeError(f"a stream's delta is text, not {type(delta).__name__}")
        # appended through locals: held alone, a string grows in place (an
        # attribute's second reference would copy the whole held text per delta)
        buf, low, self._buf, self._low = self._buf, self._low, "", ""
        buf += delta
        low += _fold(delta)
        self._buf, self._low = buf, low
        del buf, low
        end = self._off + len(self._buf)
        self._discover(end)
        hold = end - self._hold_back
        live: list[_Candidate] = []
        covered = -1  # a key block covers the text up to here: the blocks in it are not blocks
        # shapes (self-overlapping, see _self_overlapping) with a live
        # candidate still in its first run: a later anchor inside that run
        # can only end where it ends, or fail; stepping it too would cost
        # quadratic time on "eyJeyJeyJ…"
        in_run: set[int] = set()
        for cand in self._live:
            if cand.kind == _BLOCK and cand.start < covered:
                continue
            if cand.kind in in_run:
                continue
            state = self._step(cand, end)
            if state is True:
                if cand.kind >= 0 and self._compiled[cand.kind].one_run and all(i == 0 for i, _ in cand.states):
                    in_run.add(cand.kind)
                live.append(cand)
                hold = min(hold, cand.start)
                if cand.kind == _BLOCK and not cand.states:
                    covered = end + 1
            elif state:
                self._settled.append(state)
                if cand.kind == _BLOCK:
                    covered = max(covered, state[1])
        self._live = live
        self._settled = _joined(self._settled)
        return self._send(hold)

    def _send(self, cut: int) -> str:
        base = self._off
        if cut <= self._sent:
            return ""
        spans = self._settled + [
            (m.start() + base, m.end() + base)
            for p in self._r._extra for m in p.finditer(self._buf, self._sent - base)
        ]
        for start, stop in sorted(spans, reverse=True):
            if start < cut < stop:
                cut = start
        if cut <= self._sent:
            return ""
        found = self._r._find(self._buf, self._sent - base, cut - base, self._low)
        out = _apply(self._buf, self._sent - base, cut - base, found)
        self._sent = cut
        self._settled = [s for s in self._settled if s[1] > cut]
        keep = cut - _CONTEXT
        if keep - base > len(self._buf) // 2:
            self._buf, self._low = self._buf[keep - base:], self._low[keep - base:]
            self._off = keep
        return out

    def open(self, anywhere: bool = False) -> bool:
        """Whether the text held back may still become part of a secret: a
        candidate under way, a tail that begins an opening (``sk``, ``passw``,
        a secret value's first characters; case aside), or any held text
        under configured patterns (they cannot be read ahead) or when a later
        stage's values may begin ``anywhere``."""
        end = self._off + len(self._buf)
        if self._sent >= end:
            return False
        if anywhere or self._live or self._r._extra:
            return True
        tail = self._low[max(self._sent, end - self._longest) - self._off:]
        openings = self._r._openings
        for i in range(len(tail)):  # a loop, not any(): no generator per streamed piece
            if tail[i:] in openings:
                return True
        return False

    def flush(self) -> str:
        """The rest of the text, redacted (at the end of the stream)."""
        base, end = self._off, self._off + len(self._buf)
        found = self._r._find(self._buf, self._sent - base, end - base, self._low)
        out = _apply(self._buf, self._sent - base, end - base, found)
        self._buf = self._low = ""
        self._off = self._sent = self._seen = end
        self._live.clear()
        self._settled.clear()
        return out

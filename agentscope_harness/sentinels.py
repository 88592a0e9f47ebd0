"""Sentinels: the short texts the model reads in place of a refused call's
result, ``[harness:<code>] <what happened and what to do next>``.

The harness remembers every sentinel it issued in a run, so the final-answer
audit strips exactly those; a tool's own output cannot forge one into the
audit because forged markers are neutralised before the model sees them.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from .redaction import sliced

CODES = frozenset(
    {
        "quota_exhausted",
        "permission_denied",
        "prerequisite_missing",
        "not_ready",
        "enough_results",
        "duplicate_call",
        "repeated_failure",
        "dependency_down",
        "run_concluded",
        "verification_failed",
        "policy_refused",
        "policy_error",
        "rate_limited",
        "concurrency_limited",
        "pii_blocked",
        "injection_blocked",
        "approval_mismatch",
        "bad_arguments",
    },
)

_FORGED = "[harness(unverified):"
_ESCAPED_LT = "&lt;"
_REACH = 4096
"""How far past an opening bracket a disguised marker is looked for: any
number of invisible characters up to this, then the marker's few letters
(each bracket's scan ends at its first letter that cannot continue one)."""

CONFUSABLES = str.maketrans(
    "аеорсухіјԁһӏѕԛԝАВЕКМНОРСТХІЈЅοαντιρκΑΒΕΗΙΚΜΝΟΡΤΧΥΖϲϹϳͿϒυγηχ‹›",
    "aeopcyxijdhlsqwABEKMHOPCTXIJSoavtipkABEHIKMNOPTXYZcCjJYuynx<>",
)
"""Cyrillic and Greek letters drawn like Latin ones (and angle quotes drawn
like brackets): a marker spelled with them reads as the marker."""

# An opening bracket (or a compatibility form of one: fullwidth, small)
# followed by what may begin a marker: its first letter or a slash, or any
# non-ASCII character (a disguise). Everything else is skipped in C.
_OPENING = "[\\[\uff3b\ufe47<\uff1c\ufe64\u2039]"
"""The brackets a marker may open with, disguises included (what ``_reads``
takes for ``[`` or ``<``): one class, for the walk and the stream alike."""

_SUSPECT = re.compile(
    # a bracket whose next two letters, spacing or anything non-ASCII (a disguise) aside, may begin
    # ``harness:``, ``tool-output`` or ``/tool-output``: an HTML table's ``<tr>``/``</td>`` is no suspect
    _OPENING + r"(?=\s*(?:[^\x00-\x7f]|[hH]\s*(?:[aA]|[^\x00-\x7f])"
    r"|[tT]\s*(?:[oO]|[^\x00-\x7f])|/\s*(?:[^\x00-\x7f]|[tT]\s*(?:[oO]|[^\x00-\x7f]))))"
)


_MINUS_LIKE = "\u2212\u2043\u02d7\u2796"  # minus signs and bullets drawn as a hyphen
BLANK_ANYWAY = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
    + "".join(map(chr, range(0x180B, 0x1810))) + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0))),
)
"""Letters and marks drawn as nothing: fillers, joiners, variation selectors, the blank braille pattern."""


@lru_cache(maxsize=4096)
def _reads(char: str) -> str:
    """What ``char`` reads as in a marker: NFKC, casefolded, format
    characters, blanks and spaces dropped, every dash a hyphen."""
    category = unicodedata.category(char)
    if category in ("Cf", "Mn", "Me") or char.isspace() or char in BLANK_ANYWAY:  # invisible, a blank, a mark
        return ""
    if category == "Pd" or char in _MINUS_LIKE:
        return "-"
    return unicodedata.normalize("NFKC", char).translate(CONFUSABLES).casefold()


def _reads_as(text: str, pos: int, words: tuple[str, ...]) -> int:
    """The end of ``text[pos:]`` if it reads as one of ``words`` (ignoring
    disguises), else -1. Looks at most ``_REACH`` characters: a reading
    still on its way to a word after that many, through invisible
    characters (format characters, marks: thousands of zero-width spaces
    after a bracket), is a disguise, taken as the marker (its end where the
    look stopped); through spacing alone (a padded document) it is text, as
    is a text that ends on the way."""
    for word in words:  # written plainly (the common forgery): no character to read
        if text.startswith(word, pos):
            return pos + len(word)
    read, end, hidden = "", min(len(text), pos + _REACH), False
    while pos < end:
        char = text[pos]
        shown = _reads(char)
        hidden = hidden or (not shown and not char.isspace())
        read += shown
        pos += 1
        if read in words:
            return pos
        if not any(w.startswith(read) for w in words):
            return -1
    return pos if hidden and pos < len(text) else -1


def neutralise_markers(text: str, fences: bool = True) -> str:
    """Defang the harness's markers written by someone else: ``[harness:``
    becomes ``[harness(unverified):`` and the ``<`` of a ``<tool-output`` or
    ``</tool-output`` becomes ``&lt;``, also when disguised by zero-width or
    other format characters, fullwidth forms, spaces, dash variants or case
    (matched on the NFKC-normalised reading; the rest of the text is kept
    as it was). ``fences=False``: sentinel markers only."""
    if _SUSPECT.search(text) is None:  # no bracket that may begin one (most texts): one C search
        return text
    out = list(_neutralised(text, fences))
    return text if out[-1] is text else "".join(out)  # the text itself last: nothing defanged


_EXAMINED = 64
_JOINED = 65_536
"""Pieces joined in one step."""


async def neutralise_markers_sliced(text: str, fences: bool = True) -> str:
    """``neutralise_markers``, the event loop given a turn whenever the work
    has held it for a slice (a long text full of markers costs a few µs a
    marker)."""
    out = await sliced(_neutralised(text, fences))
    if out[-1] is text:  # the text itself last: nothing defanged
        return text
    if len(out) <= _JOINED:
        return "".join(out)
    joined = []
    for at in range(0, len(out), _JOINED):  # a joining of a million pieces is a step of its own
        joined.append("".join(out[at:at + _JOINED]))
        await asyncio.sleep(0)
    return "".join(joined)


_SCAN = 16_384
"""Characters searched for brackets in one C call (a megabyte of brackets
no marker follows is one long search otherwise)."""


def _suspects(text: str) -> Iterator[re.Match[str] | None]:
    """``_SUSPECT``'s matches in ``text``, ``None`` after every ``_SCAN``
    characters searched. Each search reads ``_REACH`` past its stretch, as
    far as a marker's reading goes, so a bracket at its end is judged as
    in one search."""
    for pos in range(0, len(text), _SCAN):
        stop = pos + _SCAN
        for m in _SUSPECT.finditer(text, pos, min(len(text), stop + _REACH)):
            if m.start() >= stop:
                break
            yield m
        yield None


def _neutralised(text: str, fences: bool) -> Iterator[str]:
    """``text`` in pieces, its foreign markers defanged (the text itself
    when it has none and few brackets: an empty piece every ``_EXAMINED``
    brackets examined, a turn for ``sliced`` where none is a marker)."""
    done = 0
    for n, m in enumerate(_suspects(text), 1):
        if m is None or not n % _EXAMINED:
            yield ""
            if m is None:
                continue
        at = m.start()
        if at < done:
            continue
        if _reads(text[at]) == "[":
            end = _reads_as(text, at + 1, ("harness:",))
            if end > 0:
                yield text[done:at]
                yield _FORGED
                done = end
        elif fences and _reads_as(text, at + 1, ("tool-output", "/tool-output")) > 0:
            yield text[done:at]
            yield _ESCAPED_LT
            done = at + 1
    yield text[done:] if done else text


async def fences_touching(text: str, start: int, end: int) -> tuple[int, int]:
    """``text[start:end]`` widened to cover every fence marker that crosses
    one of its edges (its reading, disguises included, reaches in from
    before ``start`` or out past ``end``): an edit of one character
    (``&lt;`` unescaped to ``<``) completes a marker it does not contain.
    Markers inside it are the caller's to find; only ``_REACH`` either side
    of each edge is read, in slices, so a large edit costs no more."""
    *_, bounds = await sliced(_fence_bounds(text, start, end))
    assert bounds is not None
    return bounds


def _fence_bounds(text: str, start: int, end: int) -> Iterator[tuple[int, int] | None]:
    """``fences_touching``'s work: ``None`` every ``_EXAMINED`` brackets
    (a turn for ``sliced``), then the bounds."""
    lo, hi, n = start, end, 0
    for edge in (start, end):
        for m in _SUSPECT.finditer(text, max(0, edge - _REACH), min(len(text), edge + _REACH)):
            at = m.start()
            if at >= edge:
                break
            n += 1
            if not n % _EXAMINED:
                yield None
            reach = _reads_as(text, at + 1, ("tool-output", "/tool-output"))
            if reach > edge:  # one past its end: a disguise read to the limit is read so again
                lo, hi = min(lo, at), max(hi, min(reach + 1, len(text)))
    yield lo, hi


_ECHOED = re.compile(r"\[harness:[a-z0-9_]{0,40}\]|</?tool-output(?![\w-])[^<>\n]{0,300}>", re.IGNORECASE)
"""A sentinel code or a fence marker, as the model may echo them."""
_CODE_CHARS = re.compile(r"[a-z0-9_]{0,40}", re.IGNORECASE)
_TAG_REST = re.compile(r"[^<>\n]{0,300}")
_WORDS = ("[harness:", "<tool-output", "</tool-output")


def strip_markers(text: str) -> str:
    """``text`` without any ``[harness:<code>]`` or fence marker, issued or
    not, and with disguised ones (see ``neutralise_markers``) defanged:
    what the user may be shown of text the model wrote."""
    if "[" not in text and "<" not in text and text.isascii():
        return text
    return neutralise_markers(_ECHOED.sub("", text))


def marker_open(text: str, pos: int) -> bool:
    """Whether ``text[pos:]`` may still become a marker ``strip_markers``
    acts on once more text is appended (a stream must hold it back)."""
    return _still_open(text, pos, "", pos)[0]


def _still_open(text: str, pos: int, read: str, at: int, whole: bool = True) -> tuple[bool, str, int]:
    """``marker_open``, going on from a reading of ``text[pos:at]`` as
    ``read`` (the text has only grown since): whether it may still become a
    marker, and the reading so far. A stream resumes it, never reading a held
    run of spacing twice. ``whole=False``: a marker's opening word is all
    there is to read (defanging changes nothing after it)."""
    if text[pos] not in "[\uff3b\ufe47<\uff1c\ufe64\u2039":
        return False, read, at
    end = min(len(text), pos + _REACH)
    while read not in _WORDS:  # the disguised reading, as neutralise_markers reads it
        if at >= end:
            return at == len(text), read, at  # a prefix of a marker, cut off by the end
        read += _reads(text[at])
        at += 1
        if read not in _WORDS and not any(w.startswith(read) for w in _WORDS):
            return False, read, at
    literal = text[pos:at].lower()
    if literal not in _WORDS or not whole:
        return False, read, at  # disguised: neutralised whatever follows
    rest = _CODE_CHARS if literal[0] == "[" else _TAG_REST
    if literal[0] == "<" and at < len(text) and (text[at].isalnum() or text[at] in "_-"):
        return False, read, at
    tail = rest.match(text, at)
    limit = 40 if literal[0] == "[" else 300
    return tail is not None and tail.end() == len(text) and tail.end() - at < limit, read, at


class MarkerStream:
    """``strip_markers`` over a text that arrives in pieces: holds back from
    the first bracket that may still become a marker, sends the rest. The
    held bracket's reading goes on with each piece (a bracket before
    thousands of spaces costs what the spaces cost). ``defang_only``:
    ``neutralise_markers`` instead, which removes nothing (JSON text stays
    the same JSON: a marker's tag may span its values)."""

    def __init__(self, defang_only: bool = False) -> None:
        self._buf = ""
        self._reading = ("", 0)
        """How far the held bracket (at 0 of ``_buf``) was read, and as what."""
        self._filter = neutralise_markers if defang_only else strip_markers
        self._whole = not defang_only

    def feed(self, delta: str) -> str:
        """Add a delta; the stripped text that is now safe to send."""
        if not delta:
            return ""
        buf = self._buf + delta
        cut = len(buf)
        for m in _BRACKET.finditer(buf):
            start = m.start()
            read, at = self._reading if start == 0 and self._buf else ("", start)
            still, read, at = _still_open(buf, start, read, at, self._whole)
            if still:
                cut, self._reading = start, (read, at - start)
                break
        self._buf = buf[cut:]
        return self._filter(buf[:cut]) if cut else ""

    def open(self, anywhere: bool = False) -> bool:
        """Whether a bracket that may still become a marker is held."""
        return bool(self._buf)

    def flush(self) -> str:
        """The rest (at the end of the stream)."""
        rest, self._buf, self._reading = self._buf, "", ("", 0)
        return self._filter(rest)


_BRACKET = re.compile(_OPENING)


_FENCE_OPEN = "<tool-output nonce="
_FENCE_CLOSE = "\n</tool-output nonce="


def fence_open(nonce: str, tool: str) -> str:
    """The opening fence line of a tool result in a run with this nonce."""
    return f'{_FENCE_OPEN}"{nonce}" tool="{tool}">'


def fence_close(nonce: str) -> str:
    """The closing fence line of a tool result in a run with this nonce."""
    return f'</tool-output nonce="{nonce}">'


def unfenced(text: str) -> str:
    """The body of a fenced tool result (its fence lines left out); any
    other text as it is."""
    if not text.startswith(_FENCE_OPEN):
        return text
    body = text.partition("\n")[2]
    return body.rpartition(_FENCE_CLOSE)[0] or body


def not_permitted(tool: str, needs: str | None = None) -> str:
    """The ``permission_denied`` text of a tool the bound principal may not
    use (``needs``: the prerequisite it may not use, of a tool it may)."""
    what = f"{tool} needs {needs} first, which is" if needs else f"{tool} is"
    return (f"{what} not available to this user. Do not retry; "
            "tell the user this action is not permitted for their account.")


def unusable_by(tool: str, principal: Any, identity_args: Mapping[str, str] | None) -> str | None:
    """The ``permission_denied`` text of a tool the bound caller cannot use
    whatever its arguments (``principal``: ``None`` when none is bound): not
    in its ``allowed_tools``, or acting for a signed-in user (``identity_args``:
    argument -> the principal's attribute) when none is, or one without such
    an attribute; ``None`` when some call of it may run. The authorization
    gate's and the argument guide's one reading (a guide offers no call that
    cannot run)."""
    if principal is not None and not principal.may_use(tool):
        return not_permitted(tool)
    if not identity_args:
        return None
    if principal is None:
        return (f"{tool} acts for a signed-in user and no user is signed in to "
                "this conversation. Do not retry; tell the user to sign in.")
    for attr in identity_args.values():
        if principal.attr(attr) is None:  # nothing the model sends is right
            return (f"{tool} needs the signed-in user's {attr}, which this user does not have. "
                    "Do not retry; tell the user this action is not available for their account.")
    return None


def format_sentinel(code: str, text: str, ref: str | None = None) -> str:
    """``[harness:<code>] <text>`` with an optional ``(ref: …)`` tail."""
    line = f"[harness:{code}] {text}"
    return f"{line} (ref: {ref})" if ref else line


def neutralise(text: str) -> str:
    """Defang sentinel markers written by a tool, so the model (and the audit)
    can tell them from the harness's own."""
    return neutralise_markers(text, fences=False)


def strip_issued(text: str, issued: set[str]) -> str:
    """Remove every sentinel the harness issued in this run from ``text``."""
    if not issued or "[harness:" not in text:
        return text
    for sentinel in sorted(issued, key=len, reverse=True):
        text = text.replace(sentinel, "")
    return text

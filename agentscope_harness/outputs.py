"""What the user is shown of text the model wrote: one filter for answers,
thinking and the finish tool's arguments, streamed and final (DESIGN §4.1).

In order: harness markers are stripped (sentinel codes, issued or not, and
fence markers the model echoes; disguised ones are defanged), then secrets
are redacted (built-in shapes, configured patterns, exact secret values),
then personal data is rewritten as ``HarnessConfig.pii`` says. Stripping
first means a marker cannot split a secret the redactor would then miss.

The stream side of each step holds back only what could still change:
a marker's prefix, a secret's prefix, and (when ``pii`` is configured) the
last ``PII_HOLD`` characters, since personal data is recognised only once
it is whole. Every step costs what the text costs.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agentscope.message import Base64Source, DataBlock, HintBlock, TextBlock

from .pii import (
    Finding,
    PiiOutcome,
    apply_pii,
    chosen_findings,
    find_pii,
    open_run,
    overlapped_from,
    pii_candidates,
    rewrite_pii,
    validate_pii_modes,
)
from .redaction import Redactor, Turns, sliced
from .sentinels import MarkerStream, fences_touching, neutralise_markers, neutralise_markers_sliced, strip_markers

log = logging.getLogger("agentscope_harness")

PII_HOLD = 320
"""Characters a PII stream holds back: longer than any value a detector
recognises as written plainly (an address is at most 254 characters), so a
value is whole before any part of it is sent; an address written longer
(its accents JSON-escaped twice) is held whole by where the stream cuts
(``_cut_between_values``)."""


PII_INLINE = 1536
"""Personal data in a result up to this size is rewritten in one step (well
under 1 ms of prose, about 3 ms of the costliest text the detectors read: a
run of IBAN-like groups, a candidate at every group); a larger result at
most this many characters at a step, the event loop given a turn between
(``sliced``)."""


class _Stage(Protocol):
    def feed(self, delta: str) -> str: ...

    def flush(self) -> str: ...

    def open(self, anywhere: bool) -> bool: ...


_LEFT_CONTEXT = 8
"""Characters before a value the detectors read (``pii._AFTER_ESCAPE``: up to ``\\uXXXX``)."""


@dataclass
class PiiStream:
    """``apply_pii`` over a text that arrives in pieces. Findings are made on
    a window reaching ``PII_HOLD`` characters past what is sent, so each is
    decided on all the text it depends on; the window is scanned only when
    it has doubled (each character is scanned about twice)."""

    modes: Mapping[str, str]
    salt: bytes
    counts: dict[str, int] = field(default_factory=dict)
    blocked_kinds: list[str] = field(default_factory=list)
    _buf: str = ""
    _before: str = ""  # the last characters sent: the detectors' left context (a JSON escape's six)

    def feed(self, delta: str) -> str:
        """Add a delta; the rewritten text that is now safe to send."""
        self._buf += delta
        if len(self._buf) < 2 * PII_HOLD:
            return ""
        return self._send(len(self._buf) - PII_HOLD)

    def flush(self) -> str:
        """The rest, rewritten (at the end of the stream)."""
        return self._send(len(self._buf)) if self._buf else ""

    def open(self, anywhere: bool) -> bool:
        """Whether text is held (a value may run across any of it)."""
        return bool(self._buf)

    def _send(self, cut: int) -> str:
        k = len(self._before)
        text = self._before + self._buf
        cut += k
        candidates = pii_candidates(text, self.modes, start=k)
        found = chosen_findings(candidates)
        cut = _cut_between_values(text, k, cut, candidates, found)
        kept = [replace(f, start=f.start - k, end=f.end - k) for f in found if f.end <= cut]
        out = rewrite_pii(text[k:cut], kept, self.modes, self.salt)
        self._note(out)
        self._before, self._buf = text[max(cut - _LEFT_CONTEXT, 0):cut], text[cut:]
        return out.text

    def _note(self, out: PiiOutcome) -> None:
        for kind, n in out.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        self.blocked_kinds += [k for k in out.blocked_kinds if k not in self.blocked_kinds]


def _cut_between_values(text: str, k: int, cut: int, candidates: list[Finding], found: list[Finding]) -> int:
    """Where a PII stream's window (``text``, sent up to ``k``) is cut: so
    that the rest is read as one scan of the whole would read it. Before a
    run of address characters that reaches the window's end (an address
    longer than the stream holds back, an accented one JSON-escaped twice,
    is not whole yet), and before any run of values that overlap there (a
    phone number inside an IBAN: which detector's value the whole scan
    chose depends on where each detector's scan stood). When that leaves
    nothing to send (text crafted as one such run), the cut is only kept
    out of a chosen value, as each step then reads its window alone."""
    if cut < len(text):
        safe = overlapped_from(candidates, min(cut, open_run(text, k)))
        if safe > k:
            return safe
    for f in found:
        if f.start < cut < f.end:  # never send part of a value
            return f.start
    return cut


class OutputStream:
    """One stream of text (a text or thinking block, a tool call's
    arguments) through the output filter's steps."""

    def __init__(self, stages: list[_Stage], source: OutputFilter) -> None:
        self._stages = stages
        self.source = source
        """The filter that made this stream (a fresh one starts from it)."""

    def feed(self, delta: str) -> str:
        """Add a delta; what is now safe to show."""
        for stage in self._stages:
            if not delta:
                return ""
            delta = stage.feed(delta)
        return delta

    def open(self) -> bool:
        """Whether what it holds back may still change with more text (the
        opening of a secret, a bracket that may become a marker; with
        ``pii``, any text held: a personal-data value may begin at any
        character, and a stage before it may hold it): then its block's end
        is not its end yet."""
        anywhere = bool(self.source.pii)
        return any(stage.open(anywhere) for stage in self._stages)

    def flush(self) -> str:
        """The rest (at the end of the block)."""
        out = ""
        for stage in self._stages:
            out = (stage.feed(out) if out else "") + stage.flush()
        return out


_HEX = frozenset("0123456789abcdefABCDEF")
_SHORT = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
"""The escapes ``json.dumps`` writes for these characters."""


def json_spelling(value: str) -> str:
    """A string's characters as ``json.dumps`` writes them between its
    quotes (not ASCII-escaped): how ``canonical_escapes`` spells them."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def canonical_escapes(text: str) -> tuple[str, str]:
    """JSON text with every escape spelled as ``json.dumps`` spells the
    character it stands for (``ensure_ascii=False``): ``\\u0061`` and ``\\/``
    written out, ``\\u0022`` as ``\\"``, ``\\u000A`` as ``\\n``, a surrogate
    pair as its character. The same JSON value, in one spelling, so a secret
    is found however the model spelled it (an exact value is also looked for
    in its ``json_spelling``). ``(the text, a trailing escape not yet whole)``."""
    out: list[str] = []
    at = 0
    while (slash := text.find("\\", at)) >= 0:
        out.append(text[at:slash])
        run = _BACKSLASHES.match(text, slash)
        assert run is not None
        pairs, odd = divmod(run.end() - slash, 2)
        if not odd:  # escaped backslashes, or (as the repair reads them) a quote inside the string
            quoted = _quote_in_string(text, run.end())
            if quoted is None:
                return "".join(out), text[slash:]
            out.append('\\"' if quoted else "\\\\" * pairs)
            at = run.end() + quoted
            continue
        escape = _escape_at(text, run.end() - 1)
        if escape is None:
            return "".join(out), text[slash:]
        out.append("\\\\" * pairs + escape[0])
        at = run.end() - 1 + escape[1]
    out.append(text[at:])
    return "".join(out), ""


_BACKSLASHES = re.compile(r"\\+")
_AFTER_QUOTE = re.compile(r"\S")


def _quote_in_string(text: str, at: int) -> int | None:
    """After an even run of backslashes: ``1`` when a quote follows that
    AgentScope's repair of the arguments reads as part of the string (no
    ``,`` ``:`` ``}`` ``]`` after it), ``0`` when not, ``None``: not known
    yet (the text ends first)."""
    if at == len(text):
        return None
    if text[at] != '"':
        return 0
    after = _AFTER_QUOTE.search(text, at + 1)
    if after is None:
        return None
    return 0 if after.group() in ",:}]" else 1


def _escape_at(text: str, at: int) -> tuple[str, int] | None:
    """The canonical spelling of the escape at ``text[at]`` and its length
    (a surrogate pair: one character); ``None``: not whole yet. Besides
    JSON's own, the escapes AgentScope's repair of malformed arguments
    decodes for the tool (``\\xNN``, ``\\'``) are read as it reads them; any
    other malformed escape is kept as it is."""
    kind = text[at + 1:at + 2]
    if not kind:
        return None
    if kind in _QUOTES:
        return kind, 2
    if kind not in "ux":
        return ("/", 2) if kind == "/" else (text[at:at + 2], 2)
    width = 4 if kind == "u" else 2
    digits = text[at + 2:at + 2 + width]
    if not _HEX.issuperset(digits):
        return (text[at:at + 2], 2)
    if len(digits) < width:
        return None
    code = int(digits, 16)
    if kind == "u" and 0xD800 <= code <= 0xDBFF:  # a high surrogate: with a low one, one character
        low = text[at + 6:at + 12]
        if len(low) < 6 and "\\u"[:len(low)] == low[:2] and _HEX.issuperset(low[2:]):
            return None
        if low[:2] == "\\u" and _HEX.issuperset(low[2:]) and 0xDC00 <= (second := int(low[2:], 16)) <= 0xDFFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)), 12
    if code in _SHORT:
        return _SHORT[code], 2 + width
    if code < 0x20 or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}", 2 + width
    return chr(code), 2 + width


_QUOTES = frozenset("'\u201c\u201d\u201e\u2018\u2019")
"""Quotes other than JSON's that a repair reads escaped as the quote itself."""


class JsonEscapes:
    """``canonical_escapes`` over JSON text that arrives in pieces: an
    escape cut by a delta is held until it is whole. What may grow while
    held is held so each delta costs what it is: a run of backslashes as
    its length, and the whitespace after an even run's quote (whose reading
    waits on the next other character) as its pieces."""

    def __init__(self) -> None:
        self._held = ""
        self._run = 0
        """Backslashes held (a run whose end is not known yet)."""
        self._spaces: list[str] | None = None
        """Whitespace after ``_held``, an even run and a quote, as it came."""

    def feed(self, delta: str) -> str:
        """Add a delta; the text with its whole escapes in canonical spelling."""
        if self._run:
            rest = delta.lstrip("\\")
            self._run += len(delta) - len(rest)
            if not rest:
                return ""
            delta, self._run = "\\" * self._run + rest, 0
        if self._spaces is not None:
            if not delta or delta.isspace():
                self._spaces.append(delta)
                return ""
            delta, self._spaces = "".join(self._spaces) + delta, None
        text, held = canonical_escapes(self._held + delta)
        if held and not held.strip("\\"):
            self._held, self._run = "", len(held)
        elif _waits_on_quote(quote := held.rstrip()):
            self._held, self._spaces = quote, [held[len(quote):]]
        else:
            self._held = held
        return text

    def open(self, anywhere: bool) -> bool:
        """Whether an escape is held unfinished."""
        return bool(self._held or self._run or self._spaces is not None)

    def flush(self) -> str:
        """A trailing escape never completed, as it came."""
        rest, run, spaces = self._held, self._run, self._spaces
        self._held, self._run, self._spaces = "", 0, None
        return "\\" * run + rest + "".join(spaces or ())


def _waits_on_quote(held: str) -> bool:
    """``held`` is an even run of backslashes and a quote (``_quote_in_string``
    waits on what follows it)."""
    return held[-1:] == '"' and not held[:-1].strip("\\")


@dataclass(frozen=True)
class OutputFilter:
    """The steps text the model wrote goes through before the user sees it.
    ``json_args``: the text is a tool call's JSON arguments: its escapes are
    put in one spelling first (``JsonEscapes``: a secret spelled with escapes
    is found, a marker spelled with them too; ``redactor`` then knows each
    exact value's JSON spelling). Harness markers are defanged, never
    removed: a fence tag's reading may span JSON values, and what is shown
    stays the JSON of the call (only the stream shows this text, the tool
    receives what the model wrote). Otherwise (answers, thinking) markers
    are stripped.
    ``pii``: detector → mode, hashed with ``salt`` (per run, so hash tags
    match within a run only)."""

    redactor: Redactor
    pii: Mapping[str, str] = field(default_factory=dict)
    salt: bytes = b""
    json_args: bool = False

    def rewritten(self, text: str) -> str:
        """``text`` as the filter shows it (``apply``'s text)."""
        return self.apply(text)[0]

    def apply(self, text: str) -> tuple[str, PiiOutcome]:
        """``text`` filtered, and what the PII step found (for ``block``)."""
        text = neutralise_markers("".join(canonical_escapes(text))) if self.json_args else strip_markers(text)
        text = self.redactor.redact(text)
        if not self.pii:
            return text, PiiOutcome(text)
        outcome = apply_pii(text, self.pii, self.salt)
        return outcome.text, outcome

    def stream(self) -> OutputStream:
        """A stream of deltas filtered as ``apply`` filters the whole."""
        stages: list[_Stage] = [MarkerStream(defang_only=self.json_args), self.redactor.stream()]
        if self.json_args:
            stages.insert(0, JsonEscapes())
        if self.pii:
            stages.append(PiiStream(self.pii, self.salt))
        return OutputStream(stages, self)


async def filter_result(
    redactor: Redactor, text: str, pii: Mapping[str, str], salt: bytes,
) -> tuple[str, bool, PiiOutcome]:
    """A tool result redacted (and whether that changed it), then its
    personal data rewritten. Large texts are done a step at a time, the
    event loop given turns between, so no result holds it for long."""
    redacted = await redactor.redact_async(text)
    changed, text = redacted != text, redacted
    if not pii:
        return text, changed, PiiOutcome(text)
    if len(text) <= PII_INLINE:
        outcome = apply_pii(text, pii, salt)
    else:
        stream = PiiStream(pii, salt)
        out = await sliced(_pii_in_pieces(stream, text))
        outcome = PiiOutcome("".join(out), stream.blocked_kinds, stream.counts)
    return outcome.text, changed, outcome


async def written_by_hook(
    before: str, after: str, redactor: Redactor, pii: Mapping[str, str], salt: bytes,
) -> str:
    """A tool result a user hook rewrote after the harness shaped it: what
    the hook wrote, and the text around each seam it made (what it kept of
    ``before`` and what it wrote may join into a secret or a marker, and so
    may a cut), shaped as a notice is: forged markers defanged (fence markers
    where the hook wrote or that its edit completes, sentinels on the whole
    span), secrets redacted and
    the tool's ``pii`` applied. The span runs ``SEAM`` characters past each
    seam, to the nearest space, so each word or marker is judged whole. In
    slices: a large write never holds the event loop."""
    start = await _shared(before, after)
    end = len(after) - await _shared(before, after, tail=True, limit=min(len(before), len(after)) - start)
    start, end = await fences_touching(after, start, end)
    lo, hi = _word_edge(after, start - SEAM, -1), _word_edge(after, end + SEAM, 1)
    written = await neutralise_markers_sliced(after[start:end])
    await _turn_after(len(written))  # each copy of megabytes below is a step of its own
    span = after[lo:start] + written + after[end:hi]
    await _turn_after(len(span))
    span = await neutralise_markers_sliced(span, fences=False)
    shaped, _, _ = await filter_result(redactor, span, pii, salt)
    await _turn_after(len(after))
    return after[:lo] + shaped + after[hi:]


async def _turn_after(copied: int) -> None:
    """A turn for the event loop before a copy of megabytes (one C call: a
    step of its own); none for a small text, whose copies cost nothing."""
    if copied > _COMPARED:
        await asyncio.sleep(0)


SEAM = 4096
"""How far past a hook's seam the text is judged with it: as far as a
disguised marker reaches, and past the longest secret."""


def _word_edge(text: str, at: int, way: int) -> int:
    """``at`` (clamped to the text) moved outwards to the nearest space, so
    the span does not cut a word, at most ``SEAM`` further (a "word" longer
    than that lies past any secret or marker the seam makes: text the hook
    kept, shaped before it)."""
    if at <= 0:
        return 0
    if at >= len(text):
        return len(text)
    if way < 0:
        floor = max(at - SEAM, 0)
        space = max(text.rfind(c, floor, at) for c in " \n\t")
        return space + 1 if space >= 0 else floor
    ceiling = min(at + SEAM, len(text))
    found = [i for i in (text.find(c, at, ceiling) for c in " \n\t") if i >= 0]
    return min(found) if found else ceiling


_COMPARED = 65_536
"""Characters of two texts compared in one step (a slice each)."""


async def _shared(a: str, b: str, tail: bool = False, limit: int | None = None) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (``tail``:
    suffix), at most ``limit``: compared a block at a time, no copy larger
    than a block, the event loop given a turn every 16 blocks."""
    n = min(len(a), len(b)) if limit is None else limit
    done = 0
    while done < n:
        step = min(_COMPARED, n - done)
        if tail:
            x, y = a[len(a) - done - step:len(a) - done], b[len(b) - done - step:len(b) - done]
        else:
            x, y = a[done:done + step], b[done:done + step]
        if x != y:
            return done + (_shared_head(x[::-1], y[::-1]) if tail else _shared_head(x, y))
        done += step
        if not done % (16 * _COMPARED):
            await asyncio.sleep(0)
    return n


def _shared_head(a: str, b: str) -> int:
    """The length of the longest common prefix: halving, each step one C comparison."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


PII_STEP_S = 0.002
"""How long one step of ``_pii_in_pieces`` should hold the loop: each step
is sized from the last one's cost per character."""
PII_LEAST = 256
"""The smallest step of ``_pii_in_pieces``: text that costs the detectors
many times what prose does (a run of digit groups is a card, a phone, an
IBAN candidate at every group) is read this many characters at a step."""


def _pii_in_pieces(stream: PiiStream, text: str) -> Iterator[str]:
    """``apply_pii`` of a large text through ``stream`` (a stream: the same
    result as the whole), each step sized to hold the loop ``PII_STEP_S`` at
    the last step's cost per character, between ``PII_LEAST`` and
    ``PII_INLINE``: costly text is read in small steps at once, and text
    that turns costly halfway costs one step of ``PII_INLINE`` at most."""
    start, size = 0, PII_INLINE
    while start < len(text):
        began = time.perf_counter()
        sent = stream.feed(text[start : start + size])
        took = time.perf_counter() - began
        start += size
        if sent:  # a step the stream only held (it scans once its window doubled) says nothing of the cost
            size = max(PII_LEAST, min(PII_INLINE, int(size * PII_STEP_S / max(took, 1e-9))))
        yield sent
    yield stream.flush()


def pii_salt(run: Any) -> bytes:
    """The salt of ``run``'s ``hash`` tags: the same value gets the same tag
    everywhere in the run (results, stream, answer; a resume in another
    process too: its key is carried in the park record), a different one in
    another run; derived from the run's own random key, never shown to
    anyone (the fence nonce is shown to the model)."""
    return hmac.new(run.pii_key.encode(), b"pii", hashlib.sha256).digest()


_DETECTOR_OF = {"card": "payment_card"}
"""Config names (``PII_DETECTORS``) that differ from ``pii.DETECTORS`` kinds."""


def pii_modes(modes: Mapping[str, str]) -> dict[str, str]:
    """A config ``pii`` mapping in the detectors' own names."""
    return {_DETECTOR_OF.get(kind, kind): mode for kind, mode in modes.items()}


def result_pii(policy: Any, run: Any) -> tuple[dict[str, str], bytes]:
    """The ``pii`` modes a tool's result is shaped by (its ``ToolPolicy.pii``)
    and the run's hash salt for them (none without modes): the content
    filter's, and a user hook's write's, the same."""
    modes = pii_modes(policy.pii) if policy is not None else {}
    return modes, pii_salt(run) if modes else b""


def quoted_pii(config: Any, policy: Any, run: Any) -> tuple[dict[str, str], bytes]:
    """The ``pii`` modes of a text that quotes a call's arguments (a
    refusal of them, AgentScope's or a gate's): the model's own words, so
    the answer's modes (``HarnessConfig.pii``, as the streamed arguments
    are rewritten) and the tool's (as its result is), the stronger of the
    two for a kind both name (a tool's ``mask`` must not show the last
    digits the streamed arguments hid); the run's hash salt."""
    modes = validate_pii_modes(pii_modes(config.pii))
    for kind, mode in validate_pii_modes(pii_modes(policy.pii) if policy is not None else {}).items():
        if _STRENGTH[mode] > _STRENGTH.get(modes.get(kind, ""), -1):
            modes[kind] = mode
    return modes, pii_salt(run) if modes else b""


_STRENGTH = {"mask": 0, "hash": 1, "redact": 2, "block": 3}
"""How much of a value each mode hides: ``mask`` shows its last digits,
``hash`` links its occurrences, ``redact`` and ``block`` show nothing."""


def quoted_shown(text: str, modes: Mapping[str, str], salt: bytes, own: frozenset[str] = frozenset()) -> str:
    """``text`` (quoting a call's arguments) with its personal data rewritten
    as ``modes`` say, except the values in ``own``: the signed-in user's own
    identity values, which a gate tells the model to send (rewritten, the
    model could never send them, and the user could never be served)."""
    if not modes or not text:
        return text
    findings = find_pii(text, modes)
    if own and findings:
        kept = _spans_of(text, own)
        # inside an occurrence only: another's address that merely contains a short value
        # ("bob@acme.com" and the tenant "acme") is still rewritten
        findings = [f for f in findings if not any(start <= f.start and f.end <= end for start, end in kept)]
    return rewrite_pii(text, findings, modes, salt).text if findings else text


def _spans_of(text: str, values: frozenset[str]) -> list[tuple[int, int]]:
    """Where each of ``values`` occurs in ``text`` (a finding inside one is
    part of the value, whatever part of it a detector took: ``liam.o'brien@…``)."""
    spans = []
    for value in values:
        at = text.find(value) if value else -1
        while at >= 0:
            spans.append((at, at + len(value)))
            at = text.find(value, at + len(value))
    return spans


def shaped_notice(text: str, redactor: Redactor, policy: Any, run: Any) -> str:
    """A notice on a tool's result as the model may read it (it may quote
    the tool's output): secrets redacted, the tool's ``pii`` applied, markers
    someone else wrote defanged; ``ctx.notice``'s and a hook's own append's."""
    modes, salt = result_pii(policy, run)
    text = redactor.redact(text)
    return neutralise_markers(apply_pii(text, modes, salt).text if modes else text)


def answer_filter(services: Any, run: Any) -> OutputFilter:
    """The filter of what the model says to the user in ``run``."""
    modes = pii_modes(services.config.pii)
    return OutputFilter(services.redactor, modes, pii_salt(run) if modes else b"")


def dependency_label(redactor: Redactor, name: str, policy: Any, run: Any) -> str:
    """A dependency's name as the harness repeats it (to the model, in a
    result's metadata): the tool's text, which may carry credentials or a
    customer's address (a URL) or forged markers, so redacted, its personal
    data rewritten as the tool's result's is (``pii``), defanged and short."""
    modes, salt = result_pii(policy, run)
    return " ".join(neutralise_markers(quoted_shown(redactor.redact(name), modes, salt)).split())[:80]


def cleaned_args(value: Any, clean: Callable[[str], str], numbers: bool = False) -> Any:
    """A tool call's parsed arguments with every string ``clean``ed (keys
    included): what a tool that delivers to the user may receive. Cleaning
    the parsed value, not its JSON, keeps the JSON valid whatever a secret
    spans. ``numbers``: every number is read as text too and becomes the
    cleaned text when cleaning changes it (a card number written as an
    int), for a value delivered as it is, never one a tool's types expect."""
    if isinstance(value, str):
        return clean(value)
    if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        text = str(value)
        cleaned = clean(text)
        return value if cleaned == text else cleaned
    if isinstance(value, dict):
        return {cleaned_args(k, clean, numbers): _labelled(k, v, clean, numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [cleaned_args(v, clean, numbers) for v in value]
    if isinstance(value, (tuple, set, frozenset)):  # parsed JSON has none; a tool's metadata may
        return type(value)(cleaned_args(v, clean, numbers) for v in value)
    return value


_MARKER = re.compile(r"\[redacted:[a-z_]+\]")


def _labelled(key: Any, value: Any, clean: Callable[[str], str], numbers: bool) -> Any:
    """A mapping's value, cleaned; a string (or, with ``numbers``, a
    number) clean on its own that its key makes a secret
    (``"SecretAccessKey": "wJalr…"``, ``"password": 9182…``: a shape found
    by its label) becomes the marker the pair is redacted with."""
    cleaned = cleaned_args(value, clean, numbers)
    number = numbers and isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (isinstance(value, str) or number) or cleaned != value or not isinstance(key, str):
        return cleaned
    pair = f'"{key}": "{value}"'
    redacted = clean(pair)
    if redacted == pair or redacted == f'"{clean(key)}": "{value}"':
        return cleaned
    markers = _MARKER.findall(redacted)
    return markers[-1] if markers else "[redacted]"


def result_text(output: Any) -> str:
    """A tool result's text as AgentScope's formatter sends it to the model:
    its text blocks, a line each (its data blocks are written between them
    as reminders of their own)."""
    if isinstance(output, str):
        return output
    return "\n".join(b.text for b in output if isinstance(b, TextBlock))


DATA_NAME_CHARS = 1_024
"""The most of a data block's name the model reads (a name is a label; the
injection detector judges it with the result's text, on the event loop)."""


async def read_names(
    blocks: Sequence[Any], redactor: Redactor, pii: Mapping[str, str], salt: bytes,
) -> list[str | None]:
    """Each data block's name as the model reads it (``read_name``; ``None``:
    it has none), read once: the injection detector judges the ones that say
    something (``data_names``) and ``shaped_data`` writes them."""
    names: list[str | None] = []
    turns = Turns()  # many names, each a short step, add up
    for block in blocks:
        names.append(None if block.name is None else await read_name(block.name, redactor, pii, salt))
        await turns.take()
    return names


def data_digests(blocks: Sequence[Any]) -> tuple[int, ...]:
    """What tells each data block from another (an image's bytes, a URL):
    a hash of its length, its two ends and an even sample between, so a
    screenshot of megabytes costs microseconds, not a pass over it."""
    digests = []
    for block in blocks:
        source = block.source
        data = source.data if isinstance(source, Base64Source) else str(source.url)
        step = max(1, len(data) // _DATA_SAMPLE)
        digests.append(hash((len(data), data[:_DATA_SAMPLE], data[-_DATA_SAMPLE:], data[::step])))
    return tuple(digests)


_DATA_SAMPLE = 4096
"""Characters of a data block read at each end, and between them, for its digest."""


def data_names(read: Sequence[str | None], blocks: Sequence[Any]) -> tuple[str, ...]:
    """What the injection detector judges of data ``blocks`` beside their
    result's text, all of it read outside the fence: the names
    ``read_names`` read, and the type and the subtype of each media type as
    a formatter writes it (``media_type_read``; ``text/Ignore_all_previous…``
    is a valid one), its separators read as spaces."""
    said = [name for name in read if name]
    for block in blocks:
        kind = media_type_read(block.source.media_type)
        # each part alone ("text" before words reports them), and whole (words split at its slash)
        said += [_TYPE_SEPARATORS.sub(" ", part) for part in (*kind.split("/"), kind)]
    return tuple(said)


_TYPE_SEPARATORS = re.compile(r"[/._+\-]+")


async def read_name(name: str, redactor: Redactor, pii: Mapping[str, str], salt: bytes) -> str:
    """A data block's name as the model reads it (its markers aside):
    redacted whole and the tool's ``pii`` applied, then cut to
    ``DATA_NAME_CHARS``. Cut after: a secret across the cut is redacted, not
    halved; and what a shrunk secret pulls in from past the cut is read, so
    it is what the detector judges."""
    text, _, _ = await filter_result(redactor, name, _field_modes(pii), salt)
    return text[:DATA_NAME_CHARS]


def _field_modes(pii: Mapping[str, str]) -> dict[str, str]:
    """A result's ``pii`` modes on a data block's field: a ``block`` kind is
    redacted (a field is no answer to withhold)."""
    return {kind: "redact" if mode == "block" else mode for kind, mode in pii.items()}


def _data_fields(block: Any) -> dict[str, str]:
    """The text AgentScope's formatter writes of a data block into the tool
    message, outside the fence: its URL source's URL, its media type and
    its name (inline base64 data is never written as text; its id is
    ``_plain_id``'s)."""
    source = block.source
    fields = {"media_type": source.media_type}
    url = getattr(source, "url", None)
    if url is not None:
        fields["url"] = str(url)
    if block.name is not None:
        fields["name"] = block.name
    return fields


_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
REDACTED_URL = "https://redacted.invalid/"
"""A data block's URL whose shaped text is no URL any more (personal data
in its host): a URL that loads back, and says so."""


def _plain_id(block_id: str) -> str:
    """A data block's id as the model is told it (``[<id>]``, and again in
    the message the formatter adds for the image, as the user's): letters,
    digits, ``_`` and ``-``, else a stable id derived from it. An id is no
    place for words: a marker the formatter's brackets complete, or an
    injected instruction, would be read outside the fence."""
    if _PLAIN_ID.fullmatch(block_id):
        return block_id
    return "data-" + hashlib.sha256(block_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _with_fields(block: Any, before: dict[str, str], after: dict[str, str]) -> Any:
    """``block`` with its changed text fields and a plain id (itself when
    nothing changed); a URL that no longer parses is ``REDACTED_URL``."""
    changed: dict[str, Any] = {k: v for k, v in after.items() if v != before[k]}
    block_id = _plain_id(block.id)
    if block_id != block.id:
        changed["id"] = block_id
    if not changed:
        return block
    source = {k: changed.pop(k) for k in ("url", "media_type") if k in changed}
    if source:
        fields = {**block.source.model_dump(), **source}
        try:  # validated: the stored state must load back
            changed["source"] = type(block.source).model_validate(fields)
        except ValueError:
            if "url" not in source:
                raise
            changed["source"] = type(block.source).model_validate({**fields, "url": REDACTED_URL})
    return block.model_copy(update=changed)


def readable_data(block: Any, redactor: Redactor) -> Any:
    """A data block another middleware wrote (a hint's) as the model may
    read it: each field the formatter writes as text (``_data_fields``)
    with its secrets redacted and the harness's markers defanged."""
    fields = _data_fields(block)
    return _with_fields(block, fields, {k: neutralise_markers(redactor.redact(v)) for k, v in fields.items()})


_MEDIA_TYPE = re.compile(
    r"\s*([A-Za-z0-9][\w!#$&^.+\-]{0,126}/[A-Za-z0-9][\w!#$&^.+\-]{0,126})\s*(?:;.*)?", re.ASCII | re.S,
)


def media_type_read(media_type: str) -> str:
    """A data block's media type as the formatter may write it into the
    tool message, unfenced: its ``type/subtype`` as RFC 6838 spells one,
    without parameters (free text there, ``; note=…``, is no type), or
    ``application/octet-stream`` for anything else."""
    spelled = _MEDIA_TYPE.fullmatch(media_type)
    return spelled.group(1) if spelled is not None else "application/octet-stream"


async def shaped_data(
    blocks: Sequence[Any], names: Sequence[str | None], redactor: Redactor, pii: Mapping[str, str], salt: bytes,
) -> list[Any]:
    """A tool result's data blocks as the model may read them: each field
    the formatter writes as text shaped as the result's text is (secrets
    redacted, the tool's ``pii`` applied, markers defanged; the name as
    ``read_names`` read it: ``names``, one per block), in steps (a megabyte
    URL, or many long names, never hold the event loop). A block itself
    when nothing in it changed."""
    modes = _field_modes(pii)
    shaped_blocks = []
    turns = Turns()
    for block, name in zip(blocks, names, strict=True):
        fields = _data_fields(block)
        shaped = {}
        for key, text in fields.items():
            if key == "name":
                text = name or ""
            elif key == "media_type":
                text = media_type_read(text)
            else:
                text, _, _ = await filter_result(redactor, text, modes, salt)
            shaped[key] = await neutralise_markers_sliced(text)
            await turns.take()
        shaped_blocks.append(_with_fields(block, fields, shaped))
    return shaped_blocks


async def shaped_link(url: str, redactor: Redactor, pii: Mapping[str, str], salt: bytes) -> str:
    """A data block's link as the model reads it (``shaped_data``'s URL
    field): secrets redacted, the tool's ``pii`` applied (``block``:
    redacted), a step at a time (a megabyte link never holds the loop)."""
    text, _, _ = await filter_result(redactor, url, _field_modes(pii), salt)
    return text


def readable_metadata(
    redactor: Redactor, metadata: dict[str, Any], pii: Mapping[str, str] | None = None, salt: bytes = b"",
) -> dict[str, Any]:
    """A tool result's metadata as it may be kept and shown: it streams to the
    UI in the result's end event and stays in the context, so its strings
    (keys too, in mappings, lists, tuples and sets; a value, a number too,
    that its key labels a secret) are redacted and their personal data
    rewritten as the tool's ``pii`` says, the ``harness`` entry's too (what
    the tool declares there, its ``facts``, is the tool's writing; the
    harness adds its own entries after). The given dict itself when nothing
    in it changes; none of it when it is nested too deeply to walk (past
    Python's recursion limit)."""
    if not metadata:
        return metadata
    modes = pii_modes(pii) if pii else {}

    def clean(text: str) -> str:
        text = redactor.redact(text)
        return apply_pii(text, modes, salt).text if modes else text

    try:
        cleaned = cleaned_args(metadata, clean, numbers=True)
    except RecursionError:  # nested past what can be walked: what cannot be cleaned is not kept
        log.warning("harness dropped a tool result's metadata nested too deeply to clean")
        return {}
    return metadata if cleaned == metadata else cleaned


HINT_SOURCE = "harness"
"""The ``source`` of the hints the harness writes (redacted as it writes them)."""


def foreign_hint_shown(redactor: Redactor, event: Any) -> Any:
    """A hint event another middleware streams (RAG's retrieved text, a
    memory's recall) as the user is shown it: its secrets redacted, as the
    model reads the hint (``redact_foreign_hints``)."""
    if event.source == HINT_SOURCE:
        return event
    hint = _hint_redacted(redactor, event.hint)
    return event if hint is event.hint else event.model_copy(update={"hint": hint})


def redact_foreign_hints(redactor: Redactor, blocks: list[Any]) -> None:
    """Redact in place the hint blocks another middleware wrote into the
    context (RAG's static mode writes what it retrieved, secrets and all,
    where the model reads it and the stored context keeps it)."""
    for block in blocks:
        if type(block) is HintBlock and block.source != HINT_SOURCE:
            hint = _hint_redacted(redactor, block.hint)
            if hint is not block.hint:
                block.hint = hint


def _hint_redacted(redactor: Redactor, hint: Any) -> Any:
    """``hint`` (text, or blocks: a data block's URL and name as a result's)
    with its secrets redacted; itself when it has none."""
    if isinstance(hint, str):
        shown = redactor.redact(hint)
        return hint if shown == hint else shown
    blocks = [
        b.model_copy(update={"text": text}) if type(b) is TextBlock and (text := redactor.redact(b.text)) != b.text
        else readable_data(b, redactor) if type(b) is DataBlock
        else b
        for b in hint
    ]
    return hint if all(a is b for a, b in zip(blocks, hint, strict=True)) else blocks


def shown_name(shown: OutputFilter, event: Any) -> Any:
    """A tool call or result event as the user is shown it: the tool's
    name is the model's to write (an invented one can carry a secret or an
    address), so it goes through the filter of the call's arguments."""
    name = shown.redactor.redact(event.tool_call_name)
    if shown.pii:
        name = apply_pii(name, shown.pii, shown.salt).text
    return event if name == event.tool_call_name else event.model_copy(update={"tool_call_name": name})


__all__ = [
    "HINT_SOURCE",
    "PII_HOLD",
    "PII_INLINE",
    "OutputFilter",
    "OutputStream",
    "PiiStream",
    "answer_filter",
    "cleaned_args",
    "filter_result",
    "foreign_hint_shown",
    "pii_modes",
    "pii_salt",
    "read_names",
    "readable_metadata",
    "redact_foreign_hints",
    "result_text",
    "shaped_data",
    "shaped_notice",
    "shown_name",
]

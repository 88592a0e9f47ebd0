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

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .pii import PiiOutcome, apply_pii, find_pii, rewrite_pii
from .redaction import Redactor, sliced
from .sentinels import MarkerStream, neutralise_markers, strip_markers

PII_HOLD = 320
"""Characters a PII stream holds back: longer than any value a detector
recognises (an address is at most 254 characters), so a value is whole
before any part of it is sent."""


PII_INLINE = 4096
"""Personal data in a result up to this size is rewritten in one step (about
1 ms of prose); a larger result this many characters at a step, the event
loop given a turn between (``sliced``)."""


class _Stage(Protocol):
    def feed(self, delta: str) -> str: ...

    def flush(self) -> str: ...


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
    _before: str = ""  # the last character sent: the detectors' left context

    def feed(self, delta: str) -> str:
        """Add a delta; the rewritten text that is now safe to send."""
        self._buf += delta
        if len(self._buf) < 2 * PII_HOLD:
            return ""
        return self._send(len(self._buf) - PII_HOLD)

    def flush(self) -> str:
        """The rest, rewritten (at the end of the stream)."""
        return self._send(len(self._buf)) if self._buf else ""

    def _send(self, cut: int) -> str:
        k = len(self._before)
        text = self._before + self._buf
        cut += k
        found = [f for f in find_pii(text, self.modes) if f.start >= k]
        for f in found:
            if f.start < cut < f.end:  # never send part of a value
                cut = f.start
                break
        kept = [replace(f, start=f.start - k, end=f.end - k) for f in found if f.end <= cut]
        out = rewrite_pii(text[k:cut], kept, self.modes, self.salt)
        self._note(out)
        self._before, self._buf = text[cut - 1 : cut] if cut > k else self._before, text[cut:]
        return out.text

    def _note(self, out: PiiOutcome) -> None:
        for kind, n in out.counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        self.blocked_kinds += [k for k in out.blocked_kinds if k not in self.blocked_kinds]


class OutputStream:
    """One stream of text (a text or thinking block, a tool call's
    arguments) through the output filter's steps."""

    def __init__(self, stages: list[_Stage]) -> None:
        self._stages = stages

    def feed(self, delta: str) -> str:
        """Add a delta; what is now safe to show."""
        for stage in self._stages:
            if not delta:
                return ""
            delta = stage.feed(delta)
        return delta

    def flush(self) -> str:
        """The rest (at the end of the block)."""
        out = ""
        for stage in self._stages:
            out = (stage.feed(out) if out else "") + stage.flush()
        return out


_STRING_STOP = re.compile(r'["\\]')
_BARE = re.compile(r'[^\s"\[\]{}:,]+')
"""A value outside a string (a number, ``true``): it may go on in the next delta."""
_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _spelled(text: str) -> str:
    """A string's characters as JSON writes them inside its quotes (a lone
    surrogate escaped: it has no UTF-8 form)."""
    inner = json.dumps(text, ensure_ascii=False)[1:-1]
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", inner) if _SURROGATE.search(inner) else inner


def _escape_at(text: str, at: int) -> tuple[str, int] | None:
    """The character the escape at ``text[at]`` stands for and its length
    (a surrogate pair: one character); ``None``: not whole yet. A malformed
    escape stands for its own characters."""
    end = len(text)
    if at + 1 == end:
        return None
    kind = text[at + 1]
    if kind != "u":
        return _SHORT_ESCAPES.get(kind, text[at:at + 2]), 2
    if at + 6 > end:
        return None if _HEX.issuperset(text[at + 2:]) else (text[at:at + 2], 2)
    digits = text[at + 2:at + 6]
    if not _HEX.issuperset(digits):
        return text[at:at + 2], 2
    code = int(digits, 16)
    if 0xD800 <= code <= 0xDBFF:  # a high surrogate: with a low one, one character
        low = text[at + 6:at + 12]
        if len(low) < 6 and "\\u"[:len(low)] == low[:2] and _HEX.issuperset(low[2:]):
            return None
        if low[:2] == "\\u" and _HEX.issuperset(low[2:]) and 0xDC00 <= (second := int(low[2:], 16)) <= 0xDFFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)), 12
    return chr(code), 6


class JsonArgsStream:
    """A tool call's JSON arguments as they stream, filtered value by value:
    each string decoded (every escape, a surrogate pair joined) and sent
    through its own text stream (``value_stream``: secrets, ``pii``), then
    written as JSON spells it. So the redactor reads what the tool receives
    (a secret the model spells with escapes is found), a match ends with its
    string (the JSON stays whole), and the value is the cleaned one. A bare
    value (a number) the filter changes becomes that text, as a string."""

    def __init__(self, value_stream: Callable[[], OutputStream]) -> None:
        self._value_stream = value_stream
        self._string: OutputStream | None = None
        """The open string's stream (``None``: between values)."""
        self._held = ""
        """An escape not yet whole, or a bare value that may go on."""

    def feed(self, delta: str) -> str:
        """Add a delta; the filtered JSON text now safe to show."""
        text, self._held = self._held + delta, ""
        out: list[str] = []
        at, end = 0, len(text)
        while at < end:
            if self._string is None:
                at = self._between(text, at, out)
            else:
                at = self._inside(text, at, out)
        return "".join(out)

    def _between(self, text: str, at: int, out: list[str]) -> int:
        bare = _BARE.match(text, at)
        if bare is None:
            out.append(text[at])
            if text[at] == '"':
                self._string = self._value_stream()
            return at + 1
        if bare.end() == len(text):
            self._held = bare.group()
            return bare.end()
        out.append(self._bare(bare.group()))
        return bare.end()

    def _inside(self, text: str, at: int, out: list[str]) -> int:
        assert self._string is not None
        stop = _STRING_STOP.search(text, at)
        if stop is None:
            out.append(_spelled(self._string.feed(text[at:])))
            return len(text)
        out.append(_spelled(self._string.feed(text[at:stop.start()])))
        at = stop.start()
        if text[at] == '"':
            out.append(_spelled(self._string.flush()) + '"')
            self._string = None
            return at + 1
        escape = _escape_at(text, at)
        if escape is None:
            self._held = text[at:]
            return len(text)
        out.append(_spelled(self._string.feed(escape[0])))
        return at + escape[1]

    def _bare(self, token: str) -> str:
        stream = self._value_stream()
        cleaned = stream.feed(token) + stream.flush()
        return token if cleaned == token else json.dumps(cleaned, ensure_ascii=False)

    def flush(self) -> str:
        """The rest (at the call's end); a string never closed is closed
        as the model left it, its held escape as it came."""
        held, self._held = self._held, ""
        if self._string is None:
            return self._bare(held) if held else ""
        string, self._string = self._string, None
        return _spelled(string.feed(held) + string.flush()) if held else _spelled(string.flush())


@dataclass(frozen=True)
class OutputFilter:
    """The steps text the model wrote goes through before the user sees it.
    ``json_args``: the text is a tool call's JSON arguments, filtered value
    by value (``JsonArgsStream``; no markers stripped: the JSON stays whole);
    otherwise (answers, thinking) harness markers are stripped first.
    ``pii``: detector → mode, hashed with ``salt`` (per run, so hash tags
    match within a run only)."""

    redactor: Redactor
    pii: Mapping[str, str] = field(default_factory=dict)
    salt: bytes = b""
    json_args: bool = False

    def apply(self, text: str) -> tuple[str, PiiOutcome]:
        """``text`` filtered, and what the PII step found (for ``block``)."""
        if self.json_args:
            stream = self.stream()
            text = stream.feed(text) + stream.flush()
            return text, PiiOutcome(text)
        text = self.redactor.redact(strip_markers(text))
        if not self.pii:
            return text, PiiOutcome(text)
        outcome = apply_pii(text, self.pii, self.salt)
        return outcome.text, outcome

    def stream(self) -> OutputStream:
        """A stream of deltas filtered as ``apply`` filters the whole."""
        if self.json_args:
            return OutputStream([JsonArgsStream(self._value_stream)])
        return OutputStream([MarkerStream(), *self._value_stream()._stages])

    def _value_stream(self) -> OutputStream:
        """Secrets, then personal data, over one text (a string's value)."""
        stages: list[_Stage] = [self.redactor.stream()]
        if self.pii:
            stages.append(PiiStream(self.pii, self.salt))
        return OutputStream(stages)


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


def _pii_in_pieces(stream: PiiStream, text: str) -> Iterator[str]:
    """``apply_pii`` of a large text through ``stream``, ``PII_INLINE``
    characters at a step (a stream: the same result as the whole)."""
    for start in range(0, len(text), PII_INLINE):
        yield stream.feed(text[start : start + PII_INLINE])
    yield stream.flush()


_RUN_KEY = secrets.token_bytes(32)
"""The key run salts are derived with: per process, never shown to anyone."""


def pii_salt(run: Any) -> bytes:
    """The salt of ``run``'s ``hash`` tags: the same value gets the same tag
    everywhere in the run (results, stream, answer), a different one in
    another run; not derivable from anything the model sees (the fence
    nonce is shown to it)."""
    return hmac.new(_RUN_KEY, f"{run.run_id}:{run.nonce}".encode(), hashlib.sha256).digest()


_DETECTOR_OF = {"card": "payment_card"}
"""Config names (``PII_DETECTORS``) that differ from ``pii.DETECTORS`` kinds."""


def pii_modes(modes: Mapping[str, str]) -> dict[str, str]:
    """A config ``pii`` mapping in the detectors' own names."""
    return {_DETECTOR_OF.get(kind, kind): mode for kind, mode in modes.items()}


def answer_filter(services: Any, run: Any) -> OutputFilter:
    """The filter of what the model says to the user in ``run``."""
    modes = pii_modes(services.config.pii)
    return OutputFilter(services.redactor, modes, pii_salt(run) if modes else b"")


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
        return {cleaned_args(k, clean, numbers): cleaned_args(v, clean, numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [cleaned_args(v, clean, numbers) for v in value]
    return value


def readable_data(block: Any, redactor: Redactor) -> Any:
    """A tool result's data block as the model may read it. AgentScope's
    formatter writes a URL source and the block's name into the tool message
    as text, outside the fence: a secret in them is redacted and a marker
    defanged (inline base64 data is never written as text)."""
    source, name = block.source, block.name
    url = getattr(source, "url", None)
    url = url if url is None else str(url)
    safe_url = url if url is None else neutralise_markers(redactor.redact(url))
    safe_name = name if name is None else neutralise_markers(redactor.redact(name))
    if safe_url == url and safe_name == name:
        return block
    update: dict[str, Any] = {"name": safe_name}
    if safe_url != url:
        update["source"] = source.model_copy(update={"url": safe_url})
    return block.model_copy(update=update)


def shown_name(redactor: Redactor, event: Any) -> Any:
    """A tool call or result event as the user is shown it: the tool's
    name is the model's to write (an invented one can carry a secret), so
    it is redacted like the call's arguments."""
    name = redactor.redact(event.tool_call_name)
    return event if name == event.tool_call_name else event.model_copy(update={"tool_call_name": name})


__all__ = [
    "PII_HOLD", "PII_INLINE", "OutputFilter", "OutputStream", "PiiStream", "answer_filter", "cleaned_args",
    "filter_result", "pii_modes", "pii_salt", "shown_name",
]

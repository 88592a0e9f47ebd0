"""Personal data detectors: find emails, phone numbers, payment cards, IBANs,
US SSNs and IP addresses in text, and redact, mask, hash or block them.

Each detector is a cheap candidate pattern plus an exact check in Python
(Luhn, ISO 13616 mod-97, SSN number ranges, ``ipaddress``). Every pattern has
bounded quantifiers and a left-context guard, so a scan costs a bounded amount
of work per start position: linear in the text, even for a megabyte of digits,
``@`` or ``:``. The patterns are conservative on purpose: a false positive
rewrites data the model needed (an order id, a date), so a number needs the
shape of the kind it claims to be, not just enough digits.

Decisions worth knowing:

- phone: international numbers need a leading ``+`` (8–15 digits); national
  ones need separators in a known layout (NANP ``(415) 555-0132`` /
  ``415-555-0132``, French ``01 23 45 67 89``, UK/German ``020 7946 0958``).
  A bare run of digits is never a phone number.
- payment card: 13–19 digits, Luhn-valid, first digit 2–6 (the card networks),
  separators (space or dash) used uniformly in groups of 3–6.
- IBAN: upper-case, a known country code, mod-97 == 1, compact or in groups
  of four.
- SSN: ``AAA-GG-SSSS`` (or spaces); nine bare digits are too often something else.
- IPv4: a dotted quad with valid octets is an address even when it might be
  a four-part version (``1.2.3.4``); ``v1.2.3.4``, three or five parts are not.
- IPv6: must parse with ``ipaddress`` and contain a decimal digit, so
  hex-only identifiers such as ``dead::beef`` or C++ ``a::b`` are not addresses.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

MODES = ("redact", "mask", "hash", "block")


@dataclass(frozen=True)
class Finding:
    """One piece of personal data: its kind and where it is (``text[start:end]``)."""

    kind: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class Detector:
    """A candidate pattern, the exact check a candidate must pass (it may
    return a shorter valid prefix length, or 0 to reject), the normal form
    the hash mode keys on, and a character the text must contain for the
    pattern to be worth running."""

    kind: str
    pattern: re.Pattern[str]
    accept: Callable[[str], int]
    normalise: Callable[[str], str]
    needs: str = ""


@dataclass
class PiiOutcome:
    """The rewritten text, the kinds configured ``block`` that were found
    (the caller refuses the whole result), and how many findings per kind."""

    text: str
    blocked_kinds: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.counts)


# --- exact checks -----------------------------------------------------------


_ASCII_NON_DIGITS = dict.fromkeys(ch for ch in range(128) if not chr(ch).isdigit())
"""Every ASCII character but a digit, deleted by ``str.translate``."""


def _digits(value: str) -> str:
    """The digits of ``value``: in one C call for ASCII text (every candidate
    a digit run is judged on, a few per group of a long run of groups)."""
    if value.isascii():
        return value.translate(_ASCII_NON_DIGITS)
    return "".join(ch for ch in value if ch.isdigit())


def luhn_valid(number: str) -> bool:
    """True when the digits of ``number`` pass the Luhn check."""
    digits = _digits(number)
    if not digits:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Countries that issue IBANs (ISO 13616 registry).
_COUNTRIES = (
    "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE "
    "GI GL GR GT HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU "
    "NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG XK YE"
)
IBAN_COUNTRIES = frozenset(_COUNTRIES.split(" "))


def iban_valid(value: str) -> bool:
    """True for a well-formed IBAN (spaces ignored): upper-case, a known
    country, 15–34 characters, ISO 13616 mod-97 remainder 1."""
    compact = value.replace(" ", "")
    if not (compact.isascii() and compact.isalnum() and compact.isupper()):
        return False
    return _iban_accept(compact) == len(compact)


def ssn_valid(value: str) -> bool:
    """True for an SSN the SSA could have issued: area not 000, 666 or
    9xx, group not 00, serial not 0000."""
    digits = _digits(value)
    if len(digits) != 9:
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_CUT = re.compile(r"[ .\-/]")
"""A separator a candidate may be cut before (``_longest``)."""


def _longest(valid: Callable[[str], bool]) -> Callable[[str], int]:
    """An acceptor returning the longest valid prefix of a candidate, cut
    only after a letter or digit before a separator: a candidate may run into
    a following number or word ("0130 00 AND", "0958 2024")."""

    def accept(value: str) -> int:
        if valid(value):
            return len(value)
        for end in reversed([cut.start() for cut in _CUT.finditer(value, 1)]):  # found in C
            if value[end - 1].isalnum() and valid(value[:end]):
                return end
        return 0

    return accept


def _card_valid(value: str) -> bool:
    digits = _digits(value)
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or not luhn_valid(digits):
        return False
    sep = next((ch for ch in value if not ch.isdigit()), "")
    if not sep:
        return True
    groups = value.split(sep)
    return len(groups[0]) == 4 and all(3 <= len(g) <= 6 for g in groups[:-1]) and all(groups)


_LETTER_DIGITS = {ord(ch): str(ord(ch) - 55) for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}


def _iban_accept(value: str) -> int:
    """The longest valid IBAN at the start of a candidate, compact or printed
    in groups of four (a candidate may run into a following word)."""
    if value[:2] not in IBAN_COUNTRIES or not value[2:4].isdigit():
        return 0
    groups = value.split(" ")
    most = 1
    while most < len(groups) and len(groups[most - 1]) == 4:  # only the last group may be short
        most += 1
    # the check reads the number after the country and check digits, then those four:
    # each group's digits taken once into a running remainder (a run of groups is a
    # candidate at every group), the four appended to it for each length
    head = groups[0][:4].translate(_LETTER_DIGITS)
    shift, last = pow(10, len(head), 97), int(head) % 97
    remainder, length, longest = 0, 0, 0
    for n, group in enumerate(groups[:most], 1):
        digits = (group[4:] if n == 1 else group).translate(_LETTER_DIGITS)
        if digits:
            remainder = (remainder * pow(10, len(digits), 97) + int(digits)) % 97
        length += len(group)
        if 15 <= length <= 34 and (remainder * shift + last) % 97 == 1:
            longest = length + n - 1  # its spaces
    return longest


_NATIONAL_PHONE = (
    r"\([2-9]\d\d\) ?[2-9]\d\d[-. ]\d{4}|[2-9]\d\d(?P<us>[-. ])[2-9]\d\d(?P=us)\d{4}"  # NANP
    r"|0[1-9](?P<fr>[ .-])\d\d(?P=fr)\d\d(?P=fr)\d\d(?P=fr)\d\d"  # FR
    r"|0\d{2,4}[ /-]\d{3,8}(?: \d{3,4})?"  # UK, DE and other trunk-prefixed layouts
)


def _phone_valid(value: str) -> bool:
    digits = _digits(value)
    if value.startswith("+"):
        return (
            8 <= len(digits) <= 15
            and value.count("(") == value.count(")")
            and not re.search(r"[ .\-()]{3}|[ .\-/][ .\-/]", value)
        )
    return value[0] != "0" or 10 <= len(digits) <= 11


def _ip_accept(cls: type[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> Callable[[str], int]:
    def accept(value: str) -> int:
        if cls is ipaddress.IPv6Address and not any(ch.isdigit() for ch in value):
            return 0
        try:
            cls(value)
        except ValueError:
            return 0
        return len(value)

    return accept


def _ip_normal(value: str) -> str:
    return str(ipaddress.ip_address(value))


# --- the detectors ----------------------------------------------------------

_ACCENTED = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
"""Latin letters with accents (Vietnamese's too): in an e-mail address (RFC 6531, IDN domains)."""
_MARK = "\u0300-\u036f"
"""Accents written apart (NFD: macOS file names, PDFs), after the letter they mark."""
_ACCENT_HEX = r"u(?:00[c-fC-F][0-9a-fA-F]|0[12][0-9a-fA-F]{2}|03[0-6][0-9a-fA-F]|1[eE][0-9a-fA-F]{2})"
_ESCAPED_LETTER = r"\\{1,2}" + _ACCENT_HEX
"""A Latin letter with an accent, or an accent, as JSON escapes it, once or
twice (``\\u00e9``, ``\\\\u00e9``: JSON in a JSON string)."""
_UNICODE_ESCAPE = re.compile(r"\\+u([0-9a-fA-F]{4})")


def _in_address(others: str = "", marks: str = "") -> str:
    """One character of an e-mail address: a letter or digit (accented too,
    written or JSON-escaped), or one of ``others``, or ``marks``."""
    return rf"(?:[A-Za-z0-9{_ACCENTED}{re.escape(others)}{marks}]|{_ESCAPED_LETTER})"


def _email_normal(value: str) -> str:
    """An address as one value however it is written: JSON's escapes
    decoded (once or twice), accents composed (NFC), lower case."""
    if "\\" in value:
        value = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), value)
    return unicodedata.normalize("NFC", value).lower()


_AFTER_ESCAPE = r"(?<=\\[nrtbf])|(?<=\\u[0-9A-Fa-f]{4})"
"""Where a value may start though a letter or digit stands before it: right
after a JSON escape (``\\n``, ``\\u00a0``), in a result or arguments kept as JSON."""

DETECTORS: dict[str, Detector] = {
    d.kind: d
    for d in (
        Detector(
            "email",
            re.compile(
                # after a backslash too (a Windows path ``\\ursula@``; where JSON would read an
                # escape, ``_scan`` starts the value after it); Latin letters with accents too
                # (``josé.garcía@``, ``müller-bau.de``), as JSON escapes them or not, no other
                # script (CJK glued to it stays out)
                # (never inside a run of escaped letters, however many backslashes each: one attempt a
                # run, not one a letter); right after a dot too (``...maria@``: a word's own dots are
                # covered by the earlier start the search finds first)
                rf"(?:(?<![A-Za-z0-9_%+\-\\{_ACCENTED}{_MARK}])|(?<=\\)(?!\\|u[0-9A-Fa-f]{{4}})|(?<=\\\\)(?!{_ACCENT_HEX})"
                rf"|(?<=\\[nrtbf])|(?<=\\u[0-9A-Fa-f]{{4}})(?<!\\{_ACCENT_HEX}))"
                rf"{_in_address('_%+-')}(?:{_in_address('._%+-', _MARK)}{{0,62}}{_in_address('_%+-', _MARK)})?"
                rf"@{_in_address()}(?:{_in_address('-', _MARK)}{{0,61}}{_in_address('', _MARK)})?"
                rf"(?:\.{_in_address()}(?:{_in_address('-', _MARK)}{{0,61}}{_in_address('', _MARK)})?){{0,8}}"
                rf"\.[A-Za-z]{{2,24}}(?![A-Za-z0-9_\-{_ACCENTED}{_MARK}])",
            ),
            lambda value: len(value),
            _email_normal,
            needs="@",
        ),
        Detector(
            "iban",
            re.compile(
                r"(?:(?<![A-Za-z0-9])|" + _AFTER_ESCAPE + ")"
                r"[A-Z]{2}\d\d(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{1,4}){3,8})(?![A-Za-z0-9])",
            ),
            _iban_accept,
            lambda value: value.replace(" ", ""),
        ),
        Detector(
            "payment_card",
            re.compile(r"(?<![\d.\-])(?:\d{13,19}|\d{4}([ \-])\d{3,6}(?:\1\d{1,6}){1,4})(?!\d)"),
            _longest(_card_valid),
            _digits,
        ),
        Detector(
            "ssn",
            re.compile(r"(?<![\d\-.])\d{3}([- ])\d\d\1\d{4}(?![\d\-])"),
            lambda value: len(value) if ssn_valid(value) else 0,
            _digits,
        ),
        Detector(
            "ipv6",
            re.compile(
                r"(?:(?<![A-Za-z0-9_:.])|" + _AFTER_ESCAPE + r")(?:[0-9A-Fa-f]{0,4}:){2,7}"
                r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}|[0-9A-Fa-f]{0,4})"
                r"(?![A-Za-z0-9_:]|\.\d)",
            ),
            _ip_accept(ipaddress.IPv6Address),
            _ip_normal,
            needs=":",
        ),
        Detector(
            "ipv4",
            re.compile(r"(?:(?<![A-Za-z0-9_.])|" + _AFTER_ESCAPE + r")"
                       r"(?:\d{1,3}\.){3}\d{1,3}(?![A-Za-z0-9_]|\.\d)"),
            _ip_accept(ipaddress.IPv4Address),
            _ip_normal,
            needs=".",
        ),
        Detector(
            "phone",
            re.compile(
                r"(?:(?<![A-Za-z0-9_+\-.])|" + _AFTER_ESCAPE + r")"
                rf"(?:\+[1-9][\d .\-()]{{6,22}}\d|{_NATIONAL_PHONE})(?![A-Za-z0-9_\-]|\.\d)",
            ),
            _longest(_phone_valid),
            lambda value: ("+" if value.startswith("+") else "") + _digits(value),
        ),
    )
}
"""The built-in detectors by kind. Where two findings overlap, the longer
wins, then the one listed first."""

_ORDER = {kind: i for i, kind in enumerate(DETECTORS)}


def validate_pii_modes(modes: Mapping[str, str]) -> dict[str, str]:
    """A plain copy of ``modes`` (detector kind → mode), or ValueError naming
    the unknown detector or mode. ``"all"`` stands for every detector."""
    out: dict[str, str] = {}
    for kind, mode in modes.items():
        if mode not in MODES:
            raise ValueError(f"pii mode {mode!r} for {kind!r} is not one of {', '.join(MODES)}")
        if kind == "all":
            for name in DETECTORS:
                out.setdefault(name, mode)
            continue
        if kind not in DETECTORS:
            raise ValueError(f"unknown pii detector {kind!r}; choose from {', '.join(DETECTORS)}, all")
        out[kind] = mode
    return out


def _scan(detector: Detector, text: str, pos: int) -> list[Finding]:
    found: list[Finding] = []
    if detector.needs and detector.needs not in text:
        return found
    search = detector.pattern.search
    while True:
        match = search(text, pos)
        if match is None:
            return found
        start = match.start()
        size = detector.accept(match.group())
        if size:
            at = _value_at(detector, text, start) if text[start - 1:start] == "\\" else start
            found.append(Finding(detector.kind, start, start + size, text[at : start + size]))
            pos = start + size
        else:
            # a rejected candidate may hide a valid one starting inside it
            pos = start + 1


_ESCAPE_AT = re.compile(r"[nrtbf]|u[0-9A-Fa-f]{4}")


def _value_at(detector: Detector, text: str, start: int) -> int:
    """Where a value found right after a backslash begins, for its tag and
    its mask: after a JSON escape's letter or ``uXXXX`` (``\\n``, and
    ``\\\\n``: a line break in JSON carried in a JSON string), so that the
    same value reads alike everywhere in a result; else at ``start``
    (``\\ursula@``). The escape's letter is rewritten with the value all the
    same (``\\nancy@`` may be a Windows path's: none of it is left)."""
    escape = _ESCAPE_AT.match(text, start)
    if escape is None or detector.pattern.match(text, escape.end()) is None:
        return start
    return escape.end()


def find_pii(text: str, detectors: Iterable[str] = DETECTORS, start: int = 0) -> list[Finding]:
    """Every finding of the named detectors in ``text``, in order and not
    overlapping; those from ``start`` on (what stands before it is read as
    a value's left edge only: no finding there hides one after it)."""
    return chosen_findings(pii_candidates(text, detectors, start))


def pii_candidates(text: str, detectors: Iterable[str] = DETECTORS, start: int = 0) -> list[Finding]:
    """Every value each detector accepts, before they are chosen among
    (they may overlap: a phone number inside an IBAN), in order."""
    candidates: list[Finding] = []
    for kind in detectors:
        if kind not in DETECTORS:
            raise ValueError(f"unknown pii detector {kind!r}; choose from {', '.join(DETECTORS)}")
        candidates += _scan(DETECTORS[kind], text, start)
    candidates.sort(key=lambda f: (f.start, f.start - f.end, _ORDER[f.kind]))
    return candidates


def chosen_findings(candidates: list[Finding]) -> list[Finding]:
    """The findings among ``candidates`` (in order): the earliest, the
    longest of those, each one overlapping none chosen before it."""
    chosen: list[Finding] = []
    end = 0
    for finding in candidates:
        if finding.start >= end:
            chosen.append(finding)
            end = finding.end
    return chosen


def overlapped_from(candidates: list[Finding], at: int) -> int:
    """Where the run of overlapping ``candidates`` (in order) that ``at``
    stands inside begins; ``at`` itself when it stands inside none. A text
    cut there is read alike on both sides: no detector's scan crosses it."""
    start, end = -1, -1
    for c in candidates:
        if c.start >= at:
            break
        if c.start >= end:
            start = c.start
        end = max(end, c.end)
    return start if start < at < end else at


_ADDRESS_RUN = re.compile(rf"[A-Za-z0-9{_ACCENTED}{_MARK}._%+@\\\-]+")
"""Characters an e-mail address may be written with (a backslash too: JSON
escapes of its accented letters): a run of them at the end of a text may be
an address not yet whole."""


def open_run(text: str, lo: int) -> int:
    """Where the run of address characters reaching the end of ``text``
    begins, not before ``lo`` (``len(text)``: the text ends in none). Read
    from the end, in C: linear in the run."""
    run = _ADDRESS_RUN.match(text[lo:][::-1])
    return len(text) - (run.end() if run is not None else 0)


def mask_value(value: str) -> str:
    """Keep the last four letters or digits, star the others, keep separators:
    ``4111 1111 1111 1111`` → ``**** **** **** 1111``."""
    keep = 4
    out = []
    for ch in reversed(value):
        if ch.isalnum():
            out.append(ch if keep > 0 else "*")
            keep -= 1
        else:
            out.append(ch)
    return "".join(reversed(out))


def hash_tag(kind: str, value: str, salt: bytes, size: int = 10) -> str:
    """``[pii:<kind>:<hex>]``: the same value gives the same tag under one
    salt (so the model can still match it across results), and a tag cannot
    be reversed or matched across runs with different salts."""
    normal = DETECTORS[kind].normalise(value) if kind in DETECTORS else value
    digest = hmac.new(salt, f"{kind}:{normal}".encode(), hashlib.sha256).hexdigest()
    return f"[pii:{kind}:{digest[:size]}]"


def apply_pii(text: str, modes: Mapping[str, str], salt: bytes) -> PiiOutcome:
    """Rewrite the personal data in ``text`` as ``modes`` say. Values of a
    ``block`` kind are redacted as well as reported, so the text is safe
    even if the caller forgets to refuse it."""
    modes = validate_pii_modes(modes)
    return rewrite_pii(text, find_pii(text, modes) if text else [], modes, salt)


def rewrite_pii(
    text: str, findings: Iterable[Finding], modes: Mapping[str, str], salt: bytes,
) -> PiiOutcome:
    """Rewrite ``findings`` (in order, not overlapping, positions in ``text``)
    as ``modes`` (validated) say: ``apply_pii`` for findings already made,
    e.g. by a stream that found them in a longer window."""
    outcome = PiiOutcome(text)
    parts: list[str] = []
    last = 0
    for f in findings:
        mode = modes[f.kind]
        parts.append(text[last : f.start])
        if mode == "mask":
            parts.append(mask_value(f.value))
        elif mode == "hash":
            parts.append(hash_tag(f.kind, f.value, salt))
        else:
            parts.append(f"[pii:{f.kind}]")
            if mode == "block" and f.kind not in outcome.blocked_kinds:
                outcome.blocked_kinds.append(f.kind)
        outcome.counts[f.kind] = outcome.counts.get(f.kind, 0) + 1
        last = f.end
    if not parts:
        return outcome
    parts.append(text[last:])
    outcome.text = "".join(parts)
    return outcome

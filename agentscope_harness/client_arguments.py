"""A client-run call's arguments, read as the client will read them.

A client decodes a call's arguments itself (a Go app with ``encoding/json``,
a browser), so the harness's judgement of AgentScope's parse holds only for a
text every JSON reader reads the same way: one object, each key once, and no
key a field of the tool's schema in another case (Go's reader fills a struct
field with a key its name folds to, where the harness judged it left out).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any


def read_one_way(written: str, judged: dict[str, Any], schema: Any = None) -> bool:
    """Whether every JSON reader reads ``written`` as ``judged``: one
    object, each key once (folded as Go folds a field's name: some readers
    match keys so), nothing around it but JSON's own whitespace (an empty
    text is the empty object), no constant JSON lacks (``NaN``, a number
    too large for a double), no integer a double does not hold exactly (a
    browser reads ``2**53 + 1`` as ``2**53``), no number judged a boolean
    (AgentScope's repair reads ``1`` as ``True``), no lone surrogate (Go
    reads it as U+FFFD), and no key, in any object of it, that is no field the tool's ``schema``
    names but folds to one it names anywhere (under whichever keyword,
    branch or reference: which branch of a union a value takes is not
    judged, so a data key of a map folding to a field name elsewhere is
    refused too). Each object is judged as it is read: one pass."""
    if not written.strip(_JSON_WHITESPACE):
        return judged == {}
    names, booleans = _schema_read(schema)
    fields = {go_folded(name) for name in names}

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(pairs) < 2:  # nothing to repeat: a key alone, or none (a row of a long list)
            if pairs and pairs[0][0] not in names and go_folded(pairs[0][0]) in fields:
                raise ValueError("a field in another case")
            return dict(pairs)
        read = dict(pairs)
        folded = list(map(go_folded, read))
        distinct = set(folded)
        if len(distinct) != len(pairs):  # an exact repeat is one key of ``read``
            raise ValueError("a repeated key")
        if not distinct.isdisjoint(fields) and any(
            one in fields and key not in names for key, one in zip(read, folded, strict=True)
        ):
            raise ValueError("a field in another case")
        return read

    try:  # an integer read as a double, as a browser reads it: equal to the judged one only if one holds it
        parsed = json.loads(written, object_pairs_hook=once, parse_constant=_no_constant, parse_float=_finite,
                            parse_int=float)
    except (ValueError, TypeError, RecursionError):
        return False
    return (
        bool(parsed == judged)
        and not (booleans and _a_number_judged_a_boolean(parsed, judged))
        and not (_may_hold_a_surrogate(written) and _holds_a_surrogate(parsed))
    )


_JSON_WHITESPACE = " \t\n\r"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _may_hold_a_surrogate(written: str) -> bool:
    """Whether ``written`` escapes (or may escape) a surrogate or holds one raw:
    a surrogate left in a parsed string is a lone one (json pairs the rest),
    so the walk runs for those texts alone."""
    if "\\ud" in written or "\\uD" in written:
        return True
    return not written.isascii() and _SURROGATE.search(written) is not None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON")


def _finite(number: str) -> float:
    value = float(number)
    if math.isinf(value):
        raise ValueError(f"{number} is too large for a double")
    return value


def _a_number_judged_a_boolean(parsed: Any, judged: Any) -> bool:
    """Whether a value equal in ``parsed`` and ``judged`` (``1 == True``) is a
    boolean in one and a number in the other: AgentScope's repair reads a
    ``0`` or ``1`` under a boolean of the schema as ``False``/``True``, where
    a browser reads the number. Equal values spell their strings and keys
    alike and no number spells ``true``: the two spellings hold as many of
    each word unless a boolean stands for a number (counted in C: a walk in
    Python held the loop 0.6 s over 330,000 objects)."""
    try:
        one, other = json.dumps(parsed), json.dumps(judged)
    except (ValueError, TypeError, RecursionError):
        return True
    return one.count("true") != other.count("true") or one.count("false") != other.count("false")


def _holds_a_surrogate(value: Any) -> bool:
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return True
        elif isinstance(node, dict):
            pending.extend(node)
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def go_folded(key: str) -> str:
    """``key`` as Go's ``encoding/json`` folds a field's name to match it:
    each character to its simple case folding (``ſ`` is ``s``, the Kelvin
    sign ``k``, ``ẞ`` is ``ß``), never a full one (``ß`` is no ``ss``,
    ``ﬁ`` no ``fi``) nor a Turkic one (``ı`` and ``İ`` stay apart from
    ``i``), as Go's ``SimpleFold`` orbits have it (Unicode 15: ``ﬅ`` is
    ``ﬆ``; and the pairs Unicode 16 and 17 added, ``Ƛ`` for ``ƛ``: a newer
    Go's, folding more than an older one needs, never less), a lone
    surrogate as U+FFFD (Go reads one so). In C calls alone, however long
    the key and whichever its characters."""
    if key.isascii():
        return key.lower()
    folded = key.casefold()
    grown = len(folded) - len(key)
    if grown and grown <= len(key) // 8:  # a few characters Python folds fully (ß to ss): Go folds them simply
        pieces = _fully_folding().split(key)  # the characters at the odd places
        pieces[0::2] = [piece.casefold() for piece in pieces[0::2]]
        pieces[1::2] = map(_go_folded_char, pieces[1::2])
        folded = "".join(pieces)
    elif grown:  # many: through placeholders, in C
        to_placeholders, back = _simply_folded()
        return _SURROGATE.sub("\ufffd", key).translate(to_placeholders).casefold().translate(back)
    return folded.translate(_GO_ONLY) if _GO_ONLY_FOUND.search(folded) else folded


def _go_folded_char(char: str) -> str:
    """One character as Go folds it (Python's Unicode 14 data, Unicode 15's pairs)."""
    if char in _GO_UNICODE_15_ORBITS:
        return _GO_UNICODE_15_ORBITS[char]
    folded = char.casefold()
    if len(folded) == 1:  # a simple folding (Python folds fully only where no single character will do)
        return folded
    lower = char.lower()
    return lower if len(lower) == 1 else char


# Unicode 15's simple foldings of characters Python (Unicode 14, and full folding
# first) leaves alone: Go 1.21+ folds each pair into one orbit.
_GO_UNICODE_15_ORBITS = {"\ufb05": "\ufb06", "\u1fd3": "\u0390", "\u1fe3": "\u03b0"}

# Case pairs Unicode 16 and 17 added, of characters Python 3.11's Unicode 14 does not
# know (drawn from the ``regex`` module's Unicode 17 tables): each to the character its
# orbit folds to here (a known one's folding, else the orbit's least).
_NEWER_ORBITS = {
    0x1C8A: 0x1C89, 0xA7CB: 0x264, 0xA7CD: 0xA7CC, 0xA7CF: 0xA7CE, 0xA7D2: 0xA7D3, 0xA7D4: 0xA7D5,
    0xA7DB: 0xA7DA, 0xA7DC: 0x19B, 0xA7DD: 0x277, 0xA7E2: 0x27C, 0xAB6C: 0xAB4B, 0xAB6D: 0xAB4C,
    0x10D70: 0x10D50, 0x10D71: 0x10D51, 0x10D72: 0x10D52, 0x10D73: 0x10D53, 0x10D74: 0x10D54, 0x10D75: 0x10D55,
    0x10D76: 0x10D56, 0x10D77: 0x10D57, 0x10D78: 0x10D58, 0x10D79: 0x10D59, 0x10D7A: 0x10D5A, 0x10D7B: 0x10D5B,
    0x10D7C: 0x10D5C, 0x10D7D: 0x10D5D, 0x10D7E: 0x10D5E, 0x10D7F: 0x10D5F, 0x10D80: 0x10D60, 0x10D81: 0x10D61,
    0x10D82: 0x10D62, 0x10D83: 0x10D63, 0x10D84: 0x10D64, 0x10D85: 0x10D65, 0x16EBB: 0x16EA0, 0x16EBC: 0x16EA1,
    0x16EBD: 0x16EA2, 0x16EBE: 0x16EA3, 0x16EBF: 0x16EA4, 0x16EC0: 0x16EA5, 0x16EC1: 0x16EA6, 0x16EC2: 0x16EA7,
    0x16EC3: 0x16EA8, 0x16EC4: 0x16EA9, 0x16EC5: 0x16EAA, 0x16EC6: 0x16EAB, 0x16EC7: 0x16EAC, 0x16EC8: 0x16EAD,
    0x16EC9: 0x16EAE, 0x16ECA: 0x16EAF, 0x16ECB: 0x16EB0, 0x16ECC: 0x16EB1, 0x16ECD: 0x16EB2, 0x16ECE: 0x16EB3,
    0x16ECF: 0x16EB4, 0x16ED0: 0x16EB5, 0x16ED1: 0x16EB6, 0x16ED2: 0x16EB7, 0x16ED3: 0x16EB8, 0x1DF41: 0x1DF40,
    0x1DF49: 0x1DF48, 0x1DF4B: 0x1DF4A, 0x1DF4E: 0x1DF4D, 0x1DF52: 0x1DF51, 0x1DF69: 0x1DF68, 0x1DF6B: 0x1DF6A,
    0x1DF6D: 0x1DF6C, 0x1DF6F: 0x1DF6E, 0x1DF73: 0x1DF72, 0x1DF75: 0x1DF74, 0x1DF77: 0x1DF76, 0x1DF79: 0x1DF78,
    0x1DF7B: 0x1DF7A, 0x1DF7D: 0x1DF7C, 0x1DF7F: 0x1DF7E, 0x1DF95: 0xDF,
}


_GO_ONLY = {**_NEWER_ORBITS, **dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)}


def _ranges(points: list[int]) -> str:
    """A regular expression's character class of ``points``, in ranges (a
    class of ranges is searched several times faster)."""
    spans: list[list[int]] = []
    for point in sorted(points):
        if spans and spans[-1][1] == point - 1:
            spans[-1][1] = point
        else:
            spans.append([point, point])
    return "[" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in spans) + "]"


_GO_ONLY_FOUND = re.compile(_ranges(list(_GO_ONLY)))


@functools.cache
def _folding_fully() -> tuple[str, ...]:
    """The characters Python folds fully (all in the Basic Multilingual Plane,
    about a hundred): read once, on the first key that holds one."""
    return tuple(c for c in map(chr, range(0x10000)) if len(c.casefold()) > 1)


@functools.cache
def _fully_folding() -> re.Pattern[str]:
    """The characters Python folds fully, as a pattern that splits a key at each."""
    return re.compile("(" + _ranges([ord(c) for c in _folding_fully()]) + ")")


@functools.cache
def _simply_folded() -> tuple[dict[int, str], dict[int, str | int]]:
    """The characters Python folds fully, each to a lone surrogate (a key's
    own are U+FFFD by then), and those back to the character Go folds it to,
    with the newer pairs: a key folds as a whole in C."""
    full = _folding_fully()
    placeholders = [chr(0xD800 + i) for i in range(len(full))]
    return (dict(zip(map(ord, full), placeholders, strict=True)),
            {**_NEWER_ORBITS, **{ord(p): _go_folded_char(c) for p, c in zip(placeholders, full, strict=True)}})


def _schema_read(schema: Any) -> tuple[frozenset[str], bool]:
    """Every name a ``properties`` of ``schema`` declares, at any depth, and
    whether it types anything ``boolean`` (where AgentScope's repair reads a
    number as a boolean)."""
    names: set[str] = set()
    booleans = False
    pending, seen = [schema], set()
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            declared = node.get("properties")
            if isinstance(declared, dict):
                names.update(name for name in declared if isinstance(name, str))
            typed = node.get("type")
            booleans = booleans or typed == "boolean" or (isinstance(typed, list) and "boolean" in typed)
            pending.extend(node.values())
    return frozenset(names), booleans


__all__ = ["go_folded", "read_one_way"]

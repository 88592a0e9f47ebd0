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
    too large for a double), no lone surrogate (Go reads it as U+FFFD), and
    no key, in any object of it, that is no field the tool's ``schema``
    names but folds to one it names anywhere (under whichever keyword,
    branch or reference: which branch of a union a value takes is not
    judged, so a data key of a map folding to a field name elsewhere is
    refused too). Each object is judged as it is read: one pass."""
    if not written.strip(_JSON_WHITESPACE):
        return judged == {}
    names = _field_names(schema)
    fields = {go_folded(name) for name in names}

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        read = dict(pairs)
        folded = set(map(go_folded, read))
        if len(folded) != len(pairs):  # an exact repeat is one key of ``read``
            raise ValueError("a repeated key")
        if not folded.isdisjoint(fields) and any(go_folded(key) in fields for key in read.keys() - names):
            raise ValueError("a field in another case")
        return read

    try:
        parsed = json.loads(written, object_pairs_hook=once, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, TypeError, RecursionError):
        return False
    return bool(parsed == judged) and not (_MAY_HOLD_A_SURROGATE.search(written) and _holds_a_surrogate(parsed))


_JSON_WHITESPACE = " \t\n\r"
# A surrogate left in a parsed string is a lone one (json pairs the rest): only a text
# that escapes one or holds one raw can leave it, so the walk runs for those alone.
_MAY_HOLD_A_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON")


def _finite(number: str) -> float:
    value = float(number)
    if math.isinf(value):
        raise ValueError(f"{number} is too large for a double")
    return value


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
    ``ﬆ``). A key of no cased character (a CJK word) is itself."""
    if key.isascii():
        return key.lower()
    if key.casefold() == key and key.lower() == key and key.upper() == key:
        return key
    return "".join(map(_go_folded_char, key))


# Unicode 15's simple foldings of characters Python (Unicode 14, and full folding
# first) leaves alone: Go 1.21+ folds each pair into one orbit.
_GO_UNICODE_15_ORBITS = {"\ufb05": "\ufb06", "\u1fd3": "\u0390", "\u1fe3": "\u03b0"}


@functools.lru_cache(maxsize=4096)
def _go_folded_char(char: str) -> str:
    if char in _GO_UNICODE_15_ORBITS:
        return _GO_UNICODE_15_ORBITS[char]
    folded = char.casefold()
    if len(folded) == 1:  # a simple folding (Python folds fully only where no single character will do)
        return folded
    lower = char.lower()
    return lower if len(lower) == 1 else char


def _field_names(schema: Any) -> frozenset[str]:
    """Every name a ``properties`` of ``schema`` declares, at any depth."""
    names: set[str] = set()
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
            pending.extend(node.values())
    return frozenset(names)


__all__ = ["go_folded", "read_one_way"]

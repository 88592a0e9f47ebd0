"""A client-run call's arguments, read as the client will read them.

A client decodes a call's arguments itself (a Go app with ``encoding/json``,
a browser), so the harness's judgement of AgentScope's parse holds only for a
text every JSON reader reads the same way: one object, each key once, and no
field of the tool's schema written in another case (Go's reader fills a
struct field case-insensitively, where the harness judged it left out).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple


def read_one_way(written: str, judged: dict[str, Any], schema: Any = None) -> bool:
    """Whether every JSON reader reads ``written`` as ``judged``: one
    object, each key once (case aside, as some readers match keys), nothing
    around it (a client decodes a call's arguments itself; an empty text is
    the empty object), and no key a field of the tool's ``schema`` in
    another case (Go's reader fills the field with it: the judged call left
    it out)."""
    if not written.strip():
        return judged == {}

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key.casefold() for key, _ in pairs}) != len(pairs):  # Go's reader matches keys case aside
            raise ValueError("a repeated key")
        return dict(pairs)

    try:
        read = json.loads(written, object_pairs_hook=once)
    except (ValueError, TypeError, RecursionError):
        return False
    return bool(read == judged) and not _field_in_another_case(read, schema)


MAX_SCHEMA_DEPTH = 32
"""How deep a tool's schema is followed for keys in another case (a schema deeper is not a tool's)."""


def _field_in_another_case(value: Any, schema: Any) -> bool:
    """Whether an object in ``value`` writes a key its ``schema`` declares
    in another case only (``ACCOUNT`` for ``account``), at any depth the
    schema describes (through local ``$ref`` and every branch of
    ``anyOf``, ``oneOf`` and ``allOf``; an array's ``items`` and
    ``prefixItems``, a map's ``additionalProperties``). Each value is
    walked once, against every schema that describes it at once: linear in
    the arguments, whatever the schema's unions."""
    return _SchemaWalk(schema).finds(value, (schema,), 0)


class _Read(NamedTuple):
    """What a union of schemas says of a value: its declared fields (each
    with the schemas that describe it), their names folded, and the schemas
    of a map's other values, an array's items and its leading items."""

    fields: dict[str, tuple[Any, ...]]
    folded: frozenset[str]
    other_values: tuple[Any, ...]
    items: tuple[Any, ...]
    leading: tuple[tuple[Any, ...], ...]


class _SchemaWalk:
    """One call's walk of its arguments along the tool's schema."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.read: dict[tuple[int, ...], _Read] = {}

    def finds(self, value: Any, schemas: tuple[Any, ...], depth: int) -> bool:
        if depth > MAX_SCHEMA_DEPTH or not schemas or not isinstance(value, (dict, list)):
            return False
        read = self._read(schemas)
        if isinstance(value, list):
            return any(
                self.finds(item, read.leading[i] if i < len(read.leading) else read.items, depth + 1)
                for i, item in enumerate(value)
            )
        for key, item in value.items():
            subs = read.fields.get(key)
            if subs is None and key.casefold() in read.folded:
                return True
            if self.finds(item, read.other_values if subs is None else subs, depth + 1):
                return True
        return False

    def _read(self, schemas: tuple[Any, ...]) -> _Read:
        key = tuple(map(id, schemas))
        known = self.read.get(key)
        if known is None:
            fields: dict[str, list[Any]] = {}
            other_values: list[Any] = []
            items: list[Any] = []
            leading: list[list[Any]] = []
            seen: set[int] = set()
            for shape in (shape for schema in schemas for shape in _shapes(schema, self.root, seen)):
                declared = shape.get("properties")
                for name, sub in declared.items() if isinstance(declared, dict) else ():
                    fields.setdefault(name, []).append(sub)
                for word, into in (("additionalProperties", other_values), ("items", items)):
                    if isinstance(shape.get(word), dict):
                        into.append(shape[word])
                prefix = shape.get("prefixItems")
                for i, sub in enumerate(prefix if isinstance(prefix, list) else ()):
                    leading.extend([] for _ in range(i + 1 - len(leading)))
                    leading[i].append(sub)
            known = self.read[key] = _Read(
                {name: tuple(subs) for name, subs in fields.items()},
                frozenset(name.casefold() for name in fields),
                tuple(other_values), tuple(items), tuple(tuple(subs) for subs in leading),
            )
        return known


def _shapes(schema: Any, root: Any, seen: set[int]) -> list[dict[str, Any]]:
    """The schemas ``schema`` stands for: itself, what its local ``$ref``
    points to (``#`` is the root), and each branch of its ``anyOf``,
    ``oneOf`` and ``allOf`` (each once: a recursive schema refers to itself)."""
    if not isinstance(schema, dict) or id(schema) in seen:
        return []
    seen.add(id(schema))
    found = [schema]
    ref = schema.get("$ref")
    if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
        found += _shapes(_pointed_to(root, ref), root, seen)
    for combined in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(combined)
        for branch in branches if isinstance(branches, list) else ():
            found += _shapes(branch, root, seen)
    return found


def _pointed_to(root: Any, ref: str) -> Any:
    """The part of ``root`` a local JSON pointer (``#/$defs/Job``, ``#``) names, else ``None``."""
    node = root
    for part in ref[2:].split("/") if ref != "#" else ():
        if not isinstance(node, dict):
            return None
        node = node.get(part.replace("~1", "/").replace("~0", "~"))
    return node


__all__ = ["read_one_way"]

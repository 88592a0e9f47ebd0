"""What a parked run was, kept in a store's park records (``ParkRecords``)
so a resume in another process goes on from exactly there: the same run a
resume in this process continues. Whatever a limit, a ladder or a report
reads of the run is carried (its counts, tokens, spend, extensions and the
offers a human was shown, its stop ladder and refusal escalation, the
successes its prerequisites and repeat checks read), not a hand-picked few:
a count left out starts again at zero on the other worker, which is a cap
that resets by moving.

One table per object names each carried field with the function that reads
it back; ``record_of`` writes the same names. A record that does not read
back whole (tampered with, or written by another version) is refused as a
whole, never applied in part: the resume is then judged as unverified.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .facts import Success, frozen, thawed

if TYPE_CHECKING:
    from .run_state import RunState


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _usd(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"not an amount: {value!r}")
    return float(value)


def _flag(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError(f"not a flag: {value!r}")
    return value


def _text(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(f"not a text: {value!r}")
    return value


def _maybe(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else read(value)


def _counts(value: Any) -> Counter[str]:
    return Counter({_text(k): _count(v) for k, v in dict(value).items()})


def _names(value: Any) -> set[str]:
    return {_text(v) for v in list(value)}


def _pairs(value: Any) -> set[tuple[str, str]]:
    return {(_text(a), _text(b)) for a, b in list(value)}


def _turns(value: Any) -> list[int]:
    return [_count(v) for v in list(value)]


def _offers(value: Any) -> dict[str, dict[str, int]]:
    return {_text(call): dict(_counts(offer)) for call, offer in dict(value).items()}


def _extensions(value: Any) -> list[dict[str, Any]]:
    return [{"what": _text(e["what"]), "by": e["by"] if type(e["by"]) is int else _usd(e["by"]),
             "approved_by": _maybe(_text)(e.get("approved_by"))} for e in list(value)]


def _batch(value: Any) -> tuple[str, int, int]:
    reply, iteration, turn = list(value)
    return _text(reply), int(iteration), int(turn)


def _succeeded(value: Any) -> dict[str, Success]:
    return {_text(digest): Success(_text(tool), frozen(dict(args)), _text(ref))
            for digest, (tool, args, ref) in dict(value).items()}


def _success_index(value: Any) -> dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[str, int, int]]:
    return {(_text(tool), tuple(map(_text, names)), tuple(map(_text, values))): _batch(batch)
            for tool, names, values, batch in list(value)}


_RUN: dict[str, Callable[[Any], Any]] = {
    "tool_calls_total": _count, "model_calls": _count, "turns": _count,
    "input_tokens": _count, "output_tokens": _count, "largest_output_tokens": _count,
    "usage_estimated": _flag, "stored_usd": _usd,
    "refusals": _counts, "refusals_by_hook": _counts,
    "offers": _offers, "extensions": _extensions, "ledger_extra": lambda v: dict(_counts(v)),
    "usd_extra": _usd, "usd_carried": _usd,
}
"""The run's carried fields: its counts, tokens, spend kept in the store,
and the budget a human extended or was offered an extension of."""

_FACTS: dict[str, Callable[[Any], Any]] = {
    "spent_usd": _usd, "ledger_used": lambda v: dict(_counts(v)), "called_tools": _counts,
    "rounds": _count, "rounds_without_progress": _count, "force_conclude": _flag,
    "forced_at": _maybe(_count), "constrained_for": _maybe(_text), "last_hint": _maybe(_text),
    "cycle_hinted": _flag, "candidates": _count, "picks": _count,
    "gate_reject_counts": _counts, "latched": _names, "refusals_met": _pairs, "denied_turns": _turns,
    "dependency_down": _names, "progress_marks": _names,
    "succeeded": _succeeded, "success_index": _success_index, "success_counts": _counts,
}
"""The facts carried: spend and ledgers, the stop ladder, refusal
escalation, and what succeeded (prerequisites, repeats, claims read it)."""


def _plain(value: Any) -> Any:
    """``value`` as JSON keeps it (sets sorted, so a record reads the same)."""
    if isinstance(value, Success):
        return [value.tool, thawed(value.args), value.ref]
    if isinstance(value, Mapping):
        if value and isinstance(next(iter(value)), tuple):  # the success index: keyed by tuples
            return [[*map(_plain, key), _plain(batch)] for key, batch in value.items()]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(map(_plain, value))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def record_of(run: RunState) -> dict[str, Any]:
    """The run's carried fields, as JSON keeps them."""
    return {
        "run": {name: _plain(getattr(run, name)) for name in _RUN},
        "facts": {name: _plain(getattr(run.facts, name)) for name in _FACTS},
    }


def carried(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's and the facts' carried fields read back from ``record``;
    raises when any of them does not read back (nothing is applied)."""
    run, facts = dict(record["run"]), dict(record["facts"])
    return (
        {name: read(run[name]) for name, read in _RUN.items()},
        {name: read(facts[name]) for name, read in _FACTS.items()},
    )


def apply(run: RunState, fields: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Give the run the fields ``carried`` read back."""
    for name, value in fields[0].items():
        setattr(run, name, value)
    for name, value in fields[1].items():
        setattr(run.facts, name, value)

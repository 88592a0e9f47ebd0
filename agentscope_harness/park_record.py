"""What a parked run was, kept in a store's park records (``ParkRecords``)
so a resume in another process goes on from exactly there: the same run a
resume in this process continues. Whatever a limit, a ladder or a report
reads of the run is carried (its counts, tokens, spend, extensions and the
offers a human was shown, its stop ladder and refusal escalation, the
successes its prerequisites and repeat checks read), and every other field
is named in ``NOT_CARRIED`` with why: a count left out starts again at zero
on the other worker, which is a cap that resets by moving.

One table per object names each carried field with the function that reads
it back; ``record_of`` writes the same names. A record that does not read
back whole (tampered with, or written by another version) is refused as a
whole, never applied in part: the resume is then judged as unverified.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .facts import Failures, Success, frozen, thawed
from .report import Decision, RunReport

if TYPE_CHECKING:
    from .run_state import RunState


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _amount(value: Any) -> float:
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


_maybe_text = _maybe(_text)


def _counts(value: Any) -> Counter[str]:
    return Counter({_text(k): _count(v) for k, v in dict(value).items()})


def _questions(value: Any) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in dict(value).items()}


def _units(value: Any) -> dict[str, int]:
    return dict(_counts(value))


def _names(value: Any) -> set[str]:
    return {_text(v) for v in list(value)}


def _pairs(value: Any) -> set[tuple[str, str]]:
    return {(_text(a), _text(b)) for a, b in list(value)}


def _turns(value: Any) -> list[int]:
    return [_count(v) for v in list(value)]


def _offers(value: Any) -> dict[str, dict[str, int]]:
    return {_text(call): dict(_counts(offer)) for call, offer in dict(value).items()}


def _extensions(value: Any) -> list[dict[str, Any]]:
    return [{"what": _text(e["what"]), "by": _count(e["by"]) if type(e["by"]) is int else _amount(e["by"]),
             "approved_by": _maybe_text(e.get("approved_by"))} for e in list(value)]


def _recent(value: Any) -> list[str]:
    return [_text(v) for v in list(value)]


def _failures(value: Any) -> dict[str, Failures]:
    return {_text(digest): _failed(list(streak)) for digest, streak in dict(value).items()}


def _failed(value: list[Any]) -> Failures:
    if len(value) == 2:  # kept before failures carried what they said: the class alone judges
        return Failures(_text(value[0]), _count(value[1]), 0, "", _count(value[1]))
    kind, streak, mutations, said, total = value
    return Failures(_text(kind), _count(streak), _count(mutations), _text(said), _count(total))


def _refused(value: Any) -> list[tuple[str, str, str | None]]:
    return [(_text(hook), _text(code), _maybe_text(tool)) for hook, code, tool in list(value)]


def _findings(value: Any) -> list[tuple[str, str]]:
    return [(_text(a), _text(b)) for a, b in list(value)]


def _batches(value: Any) -> dict[str, tuple[str, int, int]]:
    return {_text(key): _batch(batch) for key, batch in dict(value).items()}


def _reject_batches(value: Any) -> set[tuple[str, tuple[str, int, int]]]:
    return {(_text(key), _batch(batch)) for key, batch in list(value)}


def _sub_runs(value: Any) -> dict[str, list[Any]]:
    return {_text(tool): [frozen(dict(args)) for args in list(calls)] for tool, calls in dict(value).items()}


def _decisions(value: Any) -> list[Decision]:
    return [Decision.model_validate(d) for d in list(value)]


def _reports(value: Any) -> list[RunReport]:
    return [RunReport.model_validate(r) for r in list(value)]


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
    "tool_calls_total": _count, "model_calls": _count, "turns": _count, "structured_rounds": _count,
    "input_tokens": _count, "output_tokens": _count, "largest_output_tokens": _count,
    "usage_estimated": _flag, "stored_usd": _amount, "longest_model_call_s": _amount, "prefix_breaks": _count,
    "refusals": _counts, "refusals_by_hook": _counts, "breaker_failures": _counts,
    "offers": _offers, "extensions": _extensions, "ledger_extra": _units,
    "usd_extra": _amount, "usd_carried": _amount,
    "input_carried": _count, "output_carried": _count, "carried_park": _maybe_text, "unpriced_seen": _names,
    "issued": _names, "made": _batches, "asks": _questions,
    "findings": _findings, "actions": _findings, "decisions": _decisions, "children": _reports,
    "candidate_differences": lambda v: [dict(d) for d in list(v)],
    "nonce": _text,  # its fence's: the results in the context and the next ones fenced alike
    "pii_key": _text,  # its hash tags': a datum tagged before the park is tagged alike after it
}
"""The run's carried fields: its counts, tokens, spend kept in the store,
the budget a human extended or was offered an extension of, the sentinels
it issued (stripped from its answer), what it found and its report's trail,
the questions its rules asked (a partial answer elsewhere parks on the rest)."""

_FACTS: dict[str, Callable[[Any], Any]] = {
    "spent_usd": _amount, "ledger_used": _units, "called_tools": _counts, "tier": _text,
    "rounds": _count, "rounds_without_progress": _count, "force_conclude": _flag,
    "forced_at": _maybe(_count), "undelivered": _count, "constrained_for": _maybe_text,
    "last_hints": lambda v: tuple(_recent(v)), "hinted_at": _count,
    "cycle_hinted": _flag, "wrap_up_hinted": _flag, "candidates": _count, "picks": _count,
    "empty_selections": _count, "pool_emptied": _flag, "enforce_retries": _count,
    "gate_reject_counts": _counts, "latched": _names, "refusals_met": _pairs, "denied_turns": _turns,
    "reject_batches": _reject_batches, "refused": _refused, "stuck": _maybe_text, "refused_again": _maybe_text,
    "dependency_down": _names, "progress_marks": _names, "fact_batches": _batches,
    "failures": _failures, "mutations": _count, "news_from": _names, "recent_tools": _recent,
    "recent_digests": _recent,
    "loop_hinted": _names, "nudged": _names,
    "succeeded": _succeeded, "success_index": _success_index, "success_counts": _counts,
    "done_otherwise": _sub_runs, "unconfirmed": _sub_runs,
    "done_unread": _names, "tool_answer": _maybe_text, "delivered": _flag,
}
"""The facts carried: spend and ledgers, the budget tier, the stop ladder,
refusal escalation, repeated failures and calls, and what succeeded
(prerequisites, repeats, claims read it)."""

NOT_CARRIED: dict[str, str] = {
    **dict.fromkeys((
        "run_id", "agent_name", "session_id", "principal", "deadline", "facts", "table", "parent", "limits",
        "started", "timed_from", "handle", "enclosing_bounds", "binds_itself", "mode", "toolkit",
        "open_children", "live_nested", "adopt_late", "after_nested", "called_by", "bound_by",
        "inside_set_aside",
    ), "who and what the run is here: opened afresh by the resuming process, its deadline from the resume"),
    **dict.fromkeys((
        "in_flight", "admitted", "own_pieces", "judging", "judged_calls", "awaiting_human", "parked_calls", "streaming",
        "held", "shown", "candidate", "harness_answer", "report", "reopen", "superseded", "with_consumer", "replaced",
        "hold_reply_end", "ended_inside", "done_inside", "answer_blocked", "answered_in", "pauses", "replied_by",
        "narrowed_round", "harness_choice", "said_after_end", "answer_owed", "deferred_hints", "unflushed",
        "ended_at_cap", "answer_made_up", "results", "prefix", "hints_read", "artifacts", "daily_spent_usd",
        "store_error", "enclosing_refusals", "tools_bounded", "outside_cut",
        "new_fact_this_round", "unread_facts", "batch_key", "batch_seen",
    ), "this process's objects and the round in progress: none survives a park (or read afresh: the quota)"),
    **dict.fromkeys((
        "approvals", "park_awaiting", "spent_approvals", "park_id", "park_recorded", "parked_at", "earlier_parks",
        "asked_here",
        "resumed_by", "resumer_recorded", "parked_by_another",
    ), "the park itself: its own entries of the record (who, shown, awaiting, spent, park)"),
    **dict.fromkeys((
        "terminal", "stop_text", "unsupported_claims", "claimed_steps", "acts_for_nobody",
    ), "written when the run ends: a parked run has not"),
    "budget_question_shadowed": "shadow mode, which parks no run",
    "novelty": "hashes salted per process (PYTHONHASHSEED): read again there from the results in the "
               "context (``hooks.drift.recall_results``)",
}
"""Every other field of a run and its facts, and why it is not carried (a
test holds the three tables to the fields there are: a new field is a
decision, not a silent reset)."""


def _plain(value: Any) -> Any:
    """``value`` as JSON keeps it (sets sorted, so a record reads the same)."""
    if isinstance(value, Success):
        return [value.tool, thawed(value.args), value.ref]
    if isinstance(value, BaseModel):  # a decision, a sub-run's report
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        if value and isinstance(next(iter(value)), tuple):  # the success index: keyed by tuples
            return [[*map(_plain, key), _plain(batch)] for key, batch in value.items()]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(map(_plain, value))
    if isinstance(value, (list, tuple, deque)):
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
    """Give the run the fields ``carried`` read back (a window, into a
    window of this run's own length)."""
    for target, values in ((run, fields[0]), (run.facts, fields[1])):
        for name, value in values.items():
            window = getattr(target, name)
            setattr(target, name, deque(value, maxlen=window.maxlen) if isinstance(window, deque) else value)

"""Sequencing: a call whose prerequisite never happened is refused."""

from __future__ import annotations

import json
from typing import Any

from ..config import Prerequisite
from ..context import ToolCallContext
from ..errors import HarnessConfigError
from ..facts import MISSING, NO_DEFAULTS, Declared, thawed
from ..registry import HookRejectSignal, harness_hook
from ..sentinels import not_permitted


@harness_hook(
    "pre_tool_call", priority=12, name="sequence_gate", kind="safety",
    when=lambda policy, config: policy is not None and bool(policy.requires),
)
def sequence_gate(ctx: ToolCallContext) -> None:
    """Each ``requires`` prerequisite must have succeeded earlier in this run,
    with the same values of its ``same_args`` (cancel needs a lookup of that
    very order), in an earlier batch: a lookup made in the same turn as the
    cancel has a result the model has not read.

    Values compare as each tool runs with them: an argument the model left
    out is the tool's declared default (its schema's ``default``), on both
    sides; one with no such default is ``MISSING``, equal to no value."""
    call = ctx.tool
    if call.policy is None:
        return
    args, declared = call.args, call.declared
    own = declared.defaults if declared is not None else NO_DEFAULTS
    for i, prereq in enumerate(call.policy.requires):
        typo = None if declared is None else undeclared_same_args(call.name, i, prereq, call.name, declared)
        if typo is not None:  # a typo compares "missing" with "missing": any lookup does
            raise typo
        same = {arg: args[arg] if arg in args else own.get(arg, MISSING) for arg in prereq.same_args}
        if ctx.facts.has_succeeded(prereq.tool, same, before=call.batch):  # indexed as it ran
            continue
        if ctx.principal is not None and not ctx.principal.may_use(prereq.tool):  # never offered as a next step
            raise HookRejectSignal(not_permitted(call.name, needs=prereq.tool), code="permission_denied")
        # as JSON writes them, the form the model writes its arguments in
        shown = ", ".join(f"{k}={_json(v)}" for k, v in same.items() if v is not MISSING)
        raise HookRejectSignal(
            f"Call {prereq.tool}{' for ' + shown if shown else ''} first and check its result "
            f"before calling {call.name}.",
            code="prerequisite_missing",
        )


def _json(value: Any) -> str:
    return json.dumps(thawed(value), ensure_ascii=False, default=str)


def undeclared_same_args(
    name: str, i: int, prereq: Prerequisite, tool: str, declared: Declared,
) -> HarnessConfigError | None:
    """The error naming ``tools.<name>.requires[i].same_args`` when one of
    them is not an argument ``tool``'s schema declares (``tool``: the gated
    tool or its prerequisite), else ``None``. Checked at ``instrument`` and,
    for a toolkit never instrumented, when the gated call is judged."""
    unknown = [arg for arg in prereq.same_args if arg not in declared.names]
    if not unknown:
        return None
    return HarnessConfigError(
        f"tools.{name}.requires[{i}].same_args {unknown} are not arguments of {tool} "
        f"(its schema declares {sorted(declared.names)})",
    )

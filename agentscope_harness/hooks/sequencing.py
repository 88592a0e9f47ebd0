"""Sequencing: a call whose prerequisite never happened is refused."""

from __future__ import annotations

from ..context import ToolCallContext
from ..registry import HookRejectSignal, harness_hook


@harness_hook(
    "pre_tool_call", priority=12, name="sequence_gate", kind="safety",
    when=lambda policy, config: policy is not None and bool(policy.requires),
)
def sequence_gate(ctx: ToolCallContext) -> None:
    """Each ``requires`` prerequisite must have succeeded earlier in this run,
    with the same values of its ``same_args`` (cancel needs a lookup of that
    very order), in an earlier batch: a lookup made in the same turn as the
    cancel has a result the model has not read."""
    call = ctx.tool
    if call.policy is None:
        return
    for prereq in call.policy.requires:
        same = {arg: call.args.get(arg) for arg in prereq.same_args}
        if ctx.facts.has_succeeded(prereq.tool, same, before=call.batch):
            continue
        which = (
            " for " + ", ".join(f"{k}={v!r}" for k, v in same.items()) if same else ""
        )
        raise HookRejectSignal(
            f"Call {prereq.tool}{which} first and check its result before calling {call.name}.",
            code="prerequisite_missing",
        )

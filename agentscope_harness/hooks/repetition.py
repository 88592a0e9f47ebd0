"""Repetition: the same call again, the same failure again, the same tool
over and over."""

from __future__ import annotations

from ..context import ToolCallContext
from ..registry import HookRejectSignal, harness_hook


@harness_hook("pre_tool_call", priority=40, name="repeat_call_gate", kind="efficiency")
def repeat_call_gate(ctx: ToolCallContext) -> None:
    """Refuse an identical call that already succeeded or that repeats within
    one parallel batch (a presumption: latches open); refuse for good a call
    that failed the same way ``max_identical_failures`` times (an exact fact).
    Also the loop detector: one tool ``loop_threshold`` times in the last
    ``loop_window`` calls gets a hint, and the same call looping on after it
    makes the run conclude."""
    call, facts, config = ctx.tool, ctx.facts, ctx.config
    digest = call.digest
    _watch_loop(ctx, digest)

    error_class, streak = facts.failures.get(digest, (None, 0))
    if streak >= config.max_identical_failures:
        raise HookRejectSignal(
            f"This exact call failed {streak} times in a row ({error_class}). "
            "Do not retry it; change the arguments or tell the user.",
            code="repeated_failure",
            hard=True,
        )
    if facts.batch_key != call.batch:
        facts.batch_key, facts.batch_seen = call.batch, set()
    if digest in facts.batch_seen:
        raise HookRejectSignal(
            "The same call appears twice in this turn; use the result of the first one.",
            code="duplicate_call",
        )
    ctx.admit(lambda: _claim_in_batch(ctx, digest))
    earlier = facts.succeeded.get(digest)
    if earlier is not None:
        raise HookRejectSignal(
            "This exact call already succeeded in this task; reuse its earlier result.",
            code="duplicate_call",
            ref=earlier.ref,
        )


def _claim_in_batch(ctx: ToolCallContext, digest: str) -> None:
    """The first admitted call of a batch owns its digest (claimed once the
    call will run, so a call refused later does not block its twin)."""
    facts = ctx.facts
    if facts.batch_key != ctx.tool.batch:
        facts.batch_key, facts.batch_seen = ctx.tool.batch, set()
    if digest in facts.batch_seen:
        raise HookRejectSignal(
            "The same call appears twice in this turn; use the result of the first one.",
            code="duplicate_call",
        )
    facts.batch_seen.add(digest)


def _watch_loop(ctx: ToolCallContext, digest: str) -> None:
    facts, config, name = ctx.facts, ctx.config, ctx.tool.name
    facts.recent_digests.append(digest)
    count = facts.recent_tools.count(name)
    if count < config.loop_threshold:
        facts.loop_hinted.discard(name)
        return
    if name in facts.dependency_down:
        return  # the dependency-down sentinel already says "do not retry"
    if name not in facts.loop_hinted:
        facts.loop_hinted.add(name)
        ctx.notice(
            f"Note: you have called {name} {count} times in your last "
            f"{len(facts.recent_tools)} calls. If it is not giving you what you need, "
            "change approach or conclude with what you have.",
        )
        return
    same = facts.recent_digests.count(digest)
    if same >= config.loop_threshold:
        ctx.constrain(f"the same {name} call keeps repeating after a loop hint")

"""Drift: rounds that bring nothing new. The ladder climbs hint, then
constrain (``force_conclude``), then stop; never the same hint twice."""

from __future__ import annotations

from ..context import ReflectContext, ToolResultContext
from ..registry import harness_hook


@harness_hook("post_tool_call", priority=50, name="drift_result_tracker", kind="observer")
def drift_result_tracker(ctx: ToolResultContext) -> None:
    """A successful call never made before brings a new fact; a repeat does
    not. Edge-triggered: only a new fact resets the stall counter."""
    result = ctx.result
    if result.ok and ctx.tool.digest not in ctx.facts.succeeded:
        ctx.facts.new_fact_this_round = True


@harness_hook("post_reflect", priority=20, name="drift_detector", kind="observer")
def drift_detector(ctx: ReflectContext) -> None:
    """``stall_rounds`` rounds without a new fact: hint to change approach;
    twice that: ``force_conclude``."""
    facts, stall = ctx.facts, ctx.config.stall_rounds
    facts.rounds += 1
    if facts.rounds == 1:
        return  # nothing has run yet
    if facts.new_fact_this_round:
        facts.rounds_without_progress = 0
    else:
        facts.rounds_without_progress += 1
    facts.new_fact_this_round = False
    idle = facts.rounds_without_progress
    if idle >= 2 * stall and not facts.force_conclude:
        ctx.hint(
            f"Nothing new has come from the last {idle} rounds. Conclude now with "
            "what you have.",
            key="conclude",
        )
        ctx.constrain(f"{idle} rounds without progress")
    elif idle >= stall:
        ctx.hint(
            f"The last {idle} rounds brought nothing new. Change approach: different "
            "tool, different arguments, or conclude.",
            key="drift",
        )

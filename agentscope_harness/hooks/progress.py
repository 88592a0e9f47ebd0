"""Progress: a call that needs facts the run has not reached yet is early;
progress edges tell the model its next step."""

from __future__ import annotations

from ..context import ReflectContext, ToolCallContext, ToolResultContext
from ..registry import HookRejectSignal, harness_hook

_STEPS = {
    "retrieved": "retrieve results with a search tool",
    "selected": "select from the candidates",
    "planned": "make a plan",
}

_NEXT = {
    "retrieved": "You have results now: select the best ones, or answer if you have enough.",
    "selected": "You have a selection now: finish the task with it.",
    "planned": "You have a plan now: carry it out step by step.",
}


@harness_hook(
    "pre_tool_call", priority=20, name="phase_check", kind="safety",
    when=lambda policy, config: policy is not None and bool(policy.requires_facts),
)
def phase_check(ctx: ToolCallContext) -> None:
    """A tool with ``requires_facts`` waits until the run has reached them,
    in an earlier batch than its own (a result of its own batch had not been
    read when it was written); under ``force_conclude`` the
    ``waivable_facts`` are waived."""
    policy = ctx.tool.policy
    if policy is None or not policy.requires_facts:
        return
    facts = ctx.facts
    reached, batch = facts.progress_marks, ctx.tool.batch
    # a fact reached in this very batch is one the model had not read when it wrote the call
    missing = [f for f in policy.requires_facts if f not in reached or facts.fact_batches.get(f) == batch]
    if ctx.facts.force_conclude:
        missing = [f for f in missing if f not in policy.waivable_facts]
    if missing:
        steps = "; ".join(_STEPS.get(f, f"reach '{f}'") for f in missing)
        raise HookRejectSignal(
            f"Not ready to call {ctx.tool.name} yet: first {steps}.",
            code="not_ready",
        )


@harness_hook("post_tool_call", priority=19, name="transition_notice", kind="observer")
def transition_notice(ctx: ToolResultContext) -> None:
    """On a progress edge (a fact reached for the first time), say what the
    next step is. Not once the run must conclude: the next step is the answer."""
    if ctx.facts.force_conclude:
        return
    for fact in ctx.result.new_facts:
        text = _NEXT.get(fact)
        if text:
            ctx.result.notices.append(f"Note: {text}")
            ctx.decide("hint", detail=f"reached {fact}")


@harness_hook("post_reflect", priority=40, name="phase_step", kind="observer")
def phase_step(ctx: ReflectContext) -> None:
    """(1) the selection rejected every candidate: re-open retrieval;
    (2) two empty selections in a row: widen the search. Never once the run
    must conclude: the ladder does not step back down to exploring."""
    facts = ctx.facts
    if facts.force_conclude:
        return
    if facts.pool_emptied:
        facts.pool_emptied = False
        facts.latched.discard("search_gate")
        facts.gate_reject_counts.pop("search_gate", None)
        ctx.hint(
            "None of the candidates fit. Search again with different terms.",
            key="reopen_retrieval",
        )
    if facts.empty_selections >= 2:
        ctx.hint(
            "Two selections in a row found nothing. Widen the search: fewer "
            "constraints, broader terms.",
            key="widen_search",
        )

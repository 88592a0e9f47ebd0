"""Budget: ledgers, the run-wide call cap, model tiers by money left, soft
convergence nudges and settling the run's spend."""

from __future__ import annotations

from collections.abc import Callable

from ..context import HookContext, ToolCallContext, ToolResultContext
from ..outcome import terminal_state
from ..registry import HookRejectSignal, harness_hook


@harness_hook("pre_tool_call", priority=30, name="spend_gate", kind="safety")
async def spend_gate(ctx: ToolCallContext) -> None:
    """The call's ``units`` on each of its ledgers and one call on the
    run-wide ``max_tool_calls``: refused when over a cap. Then the tool's
    shared rate and concurrency limits (``rate_limited``,
    ``concurrency_limited``; ``dependency_down`` when the store cannot
    answer). The charge is made at admission, once every gate of the call
    passed, after checking again with no await in between: parallel calls
    are admitted exactly, whatever async gates run after this one."""
    _check_quota(ctx)
    await ctx.services.fleet.acquire_tool(ctx)
    ctx.admit(lambda: _charge(ctx))


def _check_quota(ctx: ToolCallContext) -> None:
    root = ctx.run.root
    limit = ctx.config.max_tool_calls
    if limit is not None and root.tool_calls_total >= limit:
        raise HookRejectSignal(
            f"The tool-call limit for this task is used up ({root.tool_calls_total}/{limit}). "
            "Answer with what you have.",
            code="quota_exhausted",
        )
    policy = ctx.tool.policy
    if policy is None or not policy.units:
        return
    used = ctx.facts.ledger_used
    for name in policy.ledgers:
        cap = ctx.config.ledgers[name].cap
        spent = used.get(name, 0)
        if spent + policy.units > cap:
            raise HookRejectSignal(
                f"The {name} quota for this task is used up ({spent}/{cap}). "
                "Answer with what you have.",
                code="quota_exhausted",
            )


def _charge(ctx: ToolCallContext) -> Callable[[], None]:
    _check_quota(ctx)
    policy = ctx.tool.policy
    charged = list(policy.ledgers) if policy is not None and policy.units else []
    units = policy.units if policy is not None else 0
    used = ctx.facts.ledger_used
    for name in charged:
        used[name] = used.get(name, 0) + units
    ctx.run.add_tool_call(1)

    def refund() -> None:
        ctx.run.add_tool_call(-1)
        for name in charged:
            used[name] -= units

    return refund


@harness_hook(
    "pre_tool_call", priority=35, name="search_gate", kind="efficiency",
    when=lambda policy, config: (
        config.enough_candidates is not None and policy is not None and policy.role == "retrieval"
    ),
)
def search_gate(ctx: ToolCallContext) -> None:
    """Enough candidates: refuse more retrieval (a presumption, so it
    latches open after ``escape_after_rejects`` refusals)."""
    enough = ctx.config.enough_candidates
    if enough is None or ctx.tool.role != "retrieval":
        return
    have = ctx.facts.candidates
    if have >= enough:
        raise HookRejectSignal(
            f"You already have {have} candidates (enough: {enough}). Select from them "
            "or answer now; search again only if none of them fit.",
            code="enough_results",
        )


@harness_hook("pre_think", priority=20, name="budget_router", kind="observer")
def budget_router(ctx: HookContext) -> None:
    """Pick the model tier from the fraction of money left; at the last tier
    answer with the fallback text without calling any model."""
    cost = ctx.config.cost
    if cost is None:
        return
    root = ctx.run.root
    if root.store_error is not None:
        ctx.stop("dependency_down", text=cost.fallback_text, code="dependency_down")
        return
    cap, daily = cost.cap_usd, root.daily_left_usd
    if daily is not None:
        cap = daily if cap is None else min(cap, daily)
    if cap is None:
        return
    left = cap - root.facts.spent_usd
    fraction = left / cap if cap > 0 else 0.0
    lite, minimal, fallback = cost.tiers
    if fraction <= fallback:
        ctx.stop("budget", text=cost.fallback_text, code="quota_exhausted")
        return
    tier = "minimal" if fraction <= minimal else "lite" if fraction <= lite else "full"
    facts = root.facts
    if tier != facts.tier:
        ctx.decide(
            "swap_model", detail=f"{facts.tier} -> {tier} ({fraction:.0%} of ${cap:.4f} left)",
        )
        facts.tier = tier


@harness_hook("post_tool_call", priority=20, name="result_nudges", kind="observer")
def result_nudges(ctx: ToolResultContext) -> None:
    """Soft convergence: when a ledger is nearly or fully spent, or the run
    must conclude, say so in the result (once each)."""
    result, facts = ctx.result, ctx.facts
    nudges: list[tuple[str, str]] = []
    policy = ctx.tool.policy
    if policy is not None:
        for name in policy.ledgers:
            ledger = ctx.config.ledgers[name]
            used = facts.ledger_used.get(name, 0)
            if used >= ledger.cap:
                nudges.append(
                    (f"spent:{name}", f"The {name} quota is now used up ({used}/{ledger.cap}): "
                     "stop retrieving and conclude."),
                )
            elif ledger.soft_at is not None and used >= ledger.soft_at:
                nudges.append(
                    (f"soft:{name}", f"The {name} quota is nearly used up ({used}/{ledger.cap}): "
                     "start concluding."),
                )
    if facts.force_conclude and ctx.tool.role != "finish":
        nudges.append(("conclude", "Stop retrieving and conclude now."))
    for key, text in nudges:
        if key not in facts.nudged:
            facts.nudged.add(key)
            result.notices.append(f"Note: {text}")
            ctx.decide("hint", detail=text)


@harness_hook("on_session_end", priority=90, name="strategy_feedback", kind="observer")
def strategy_feedback(ctx: HookContext) -> None:
    """Record how the run ends and what it spent, as the last decision
    before the run settles (the lifecycle settles it: the report, the
    report event, the callback; the daily spend was charged per model
    call, as it was spent)."""
    state, reason = terminal_state(ctx.run, ctx.config.finish_required(), ctx.end_reason)
    ctx.decide(
        "terminal", code=state.value,
        detail=f"{reason}; spent ${ctx.run.facts.spent_usd:.6f} in {ctx.run.model_calls} model calls",
    )

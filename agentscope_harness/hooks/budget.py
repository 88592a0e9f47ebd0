"""Budget: ledgers, the run-wide call cap, model tiers by money left, soft
convergence nudges and settling the run's spend."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..context import REASONS, HookContext, ToolCallContext, ToolResultContext
from ..outcome import terminal_state
from ..registry import HookRejectSignal, harness_hook

if TYPE_CHECKING:
    from ..config import CostPolicy
    from ..run_state import RunState


@harness_hook("pre_tool_call", priority=30, name="spend_gate", kind="safety")
def spend_gate(ctx: ToolCallContext) -> None:
    """The call's ``units`` on each of its ledgers and one call on the
    run-wide ``max_tool_calls``: refused when over a cap. The charge is made
    at admission, once every gate of the call passed, after checking again
    with no await in between: parallel calls are admitted exactly, whatever
    async gates run after this one."""
    _check_quota(ctx)
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
    """Pick the model tier from the fraction of the budget left: the least
    left of money (``cap_usd``, the daily quota) and run-wide tokens
    (``max_input_tokens``, ``max_output_tokens``, sub-agents included). At
    the last tier answer with the fallback text without calling any model.
    Then tell the model what is left when that changed (``disclose_budget``)."""
    cost = ctx.config.cost
    root = ctx.run.root
    facts = root.facts
    if cost is not None:
        fallback_text = cost.fallback_text.format(reason=REASONS["budget"])
        if root.store_error is not None:
            ctx.stop("dependency_down", text=fallback_text, code="dependency_down")
            return
        least = min(_budget_left(cost, root), default=None)
        if least is not None:
            fraction, what = least
            lite, minimal, fallback = cost.tiers
            if fraction <= fallback:
                ctx.stop("budget", text=fallback_text, code="quota_exhausted")
                return
            tier = "minimal" if fraction <= minimal else "lite" if fraction <= lite else "full"
            if tier != facts.tier:
                ctx.decide("swap_model", detail=f"{facts.tier} -> {tier} ({what})")
                facts.tier = tier
    _disclose(ctx)


def _budget_left(cost: CostPolicy, root: RunState) -> list[tuple[float, str]]:
    """``(fraction left, what)`` of each budget the run has."""
    out: list[tuple[float, str]] = []
    cap, daily = cost.cap_usd, root.daily_left_usd
    if daily is not None:
        cap = daily if cap is None else min(cap, daily)
    if cap is not None:
        left = cap - root.facts.spent_usd
        out.append((left / cap if cap > 0 else 0.0, f"{_usd(left)} of {_usd(cap)} left"))
    for limit, used, kind in (
        (cost.max_input_tokens, root.input_tokens, "input"),
        (cost.max_output_tokens, root.output_tokens, "output"),
    ):
        if limit is not None:
            left_tokens = max(limit - used, 0)
            out.append((left_tokens / limit, f"{left_tokens} of {limit} {kind} tokens left"))
    return out


def _usd(value: float) -> str:
    value = max(value, 0.0)
    return f"${value:.2f}" if value >= 0.1 or value == 0 else f"${value:.4f}"


def status_line(ctx: HookContext) -> str | None:
    """What is left of the run's budget, in one line (``None``: no limits)."""
    run, config = ctx.run, ctx.config
    root = run.root
    parts: list[str] = []
    if run.deadline is not None:
        parts.append(f"{max(run.deadline - time.monotonic(), 0):.0f}s left")
    if config.cost is not None:
        parts += [what for _, what in _budget_left(config.cost, root)]
    if config.max_model_calls is not None:
        parts.append(f"{max(config.max_model_calls - root.model_calls, 0)} model calls left")
    if config.max_tool_calls is not None:
        parts.append(f"{max(config.max_tool_calls - root.tool_calls_total, 0)} tool calls left")
    used = root.facts.ledger_used
    for name, ledger in config.ledgers.items():
        parts.append(f"{name} {max(ledger.cap - used.get(name, 0), 0)}/{ledger.cap} left")
    if not parts:
        return None
    tier = root.facts.tier
    if tier != "full":
        parts.append(f"now on the {tier} model")
    return "[harness:budget] " + " \u00b7 ".join(parts)


def _budget_marks(ctx: HookContext) -> set[str]:
    """The meaningful budget events reached so far: a tier, a ledger's soft
    limit (or cap), the wrap-up window."""
    root, config = ctx.run.root, ctx.config
    marks = {f"budget:tier:{root.facts.tier}"} if root.facts.tier != "full" else set()
    used = root.facts.ledger_used
    for name, ledger in config.ledgers.items():
        soft = ledger.cap if ledger.soft_at is None else ledger.soft_at
        if used.get(name, 0) >= soft:
            marks.add(f"budget:soft:{name}")
    wrap_up, deadline = config.effective_wrap_up_s(), ctx.run.deadline
    if wrap_up is not None and deadline is not None and deadline - time.monotonic() <= wrap_up:
        marks.add("budget:wrap_up")
    return marks


def _disclose(ctx: HookContext) -> None:
    """The status line as a hint (written before the call: prefix-safe), on
    a meaningful change (``"changes"``), before every call (``"every_call"``)
    or never (``"off"``). The audit strips it should the answer quote it."""
    mode = ctx.config.disclose_budget
    if mode == "off":
        return
    facts = ctx.facts  # each agent of a nesting is told once
    if mode == "changes":
        new = _budget_marks(ctx) - facts.nudged
        if not new:
            return
        facts.nudged |= new
    line = status_line(ctx)
    if line is None:
        return
    ctx.run.remember_sentinel("budget", line)
    ctx.hint(line, key=f"budget_status:{ctx.run.root.model_calls}")


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

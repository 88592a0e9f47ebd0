"""Budget: ledgers, the run-wide call cap, model tiers by money left, soft
convergence nudges and settling the run's spend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ..context import HookContext, ToolCallContext, ToolResultContext, fallback, nobody_to_ask
from ..deadline import seconds_told
from ..errors import DependencyDown
from ..facts import finish_required
from ..lazy import made
from ..outcome import terminal_state
from ..registry import HookRejectSignal, harness_hook
from ..report import TerminalState
from ..stores import daily_left

if TYPE_CHECKING:
    from ..approvals import UsdExtension
    from ..config import CostPolicy
    from ..run_state import RunState
    from ..services import Services


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


def _check_quota(ctx: ToolCallContext, admitting: bool = False) -> None:
    # every enclosing run's cap, whichever Harness opened it
    calls = None if uncounted(ctx) else ctx.run.tool_call_cap()
    if calls is not None and calls[0] >= calls[1]:
        raise HookRejectSignal(tool_calls_used_up(calls), code="quota_exhausted")
    policy = ctx.tool.policy
    if policy is None or not policy.units:
        return
    used = ctx.facts.ledger_used
    root = ctx.run.root
    for name in policy.ledgers:
        ledger = ctx.config.ledgers[name]
        cap = root.ledger_cap(name, ledger.cap)
        spent = used.get(name, 0)
        if spent + policy.units <= cap:
            continue
        # at admission the call can no longer be parked: exhausted is refused (in shadow
        # mode a call asked about runs, as the ask was recorded: it is not refused too)
        if ledger.on_exhausted == "ask" and (
            ctx.ask_reason is not None and ctx.services.shadow if admitting else _extend_or_ask(ctx, name, spent, cap)
        ):
            continue
        raise HookRejectSignal(
            f"The {name} quota for this task is used up ({spent}/{cap}). "
            "Answer with what you have.",
            code="quota_exhausted",
        )


def uncapped_answer(ctx: HookContext) -> bool:
    """A finishing call is how the model answers with what it has (what
    ``max_tool_calls``' refusal tells it to do, and what a concluding run
    is narrowed to): the first of a batch is neither refused by the cap nor
    counted on it, as AgentScope's own structured-output call is not; any
    other of the batch is a call like any (a run gives one answer). A
    sub-agent's is not: it answers its lead, a call in the lead's run."""
    tool, run = ctx.tool, ctx.run
    return tool is not None and tool.role == "finish" and run.parent is None and run.answered_in != tool.batch


def uncounted(ctx: HookContext) -> bool:
    """A call ``max_tool_calls`` neither refuses nor counts: the first
    finishing call of a batch (``uncapped_answer``) or the toolkit's own
    meta tool (``ToolCallView.meta_tool``)."""
    return uncapped_answer(ctx) or (ctx.tool is not None and ctx.tool.meta_tool)


def tool_calls_used_up(calls: tuple[int, int]) -> str:
    """What the model is told when ``max_tool_calls`` (``(used, cap)``) is reached."""
    return f"The tool-call limit for this task is used up ({calls[0]}/{calls[1]}). Answer with what you have."


UNVERIFIED_APPROVAL = (
    "This approval cannot be checked against the call the user saw. Do not run it; ask the user again."
)
"""What a call resumed on an approval this process cannot verify (parked in
another, no record of it here) reads, when it needs one."""


def _extend_or_ask(ctx: ToolCallContext, name: str, spent: int, cap: int) -> bool:
    """An exhausted ``on_exhausted="ask"`` ledger: a resumed call whose
    human was offered this very extension gets it (recorded in the report);
    a new call is parked with the offer. Anything else is refused (False)."""
    run, call = ctx.run, ctx.tool
    root = run.root
    what = f"ledger:{name}"
    units = call.policy.units if call.policy is not None else 0
    if call.resumed:
        by = run.offers.get(call.id, {}).pop(what, None)
        if by is None and not run.asked_here:  # a "yes" to an offer this process never made: ask again
            raise HookRejectSignal(UNVERIFIED_APPROVAL, code="approval_mismatch")
        if by is None:  # the human answered another question (an app's own): the extension is asked now
            ctx.asks_anew = True
            return _offer(ctx, name, what, spent, cap, units)
        root.ledger_extra[name] = root.ledger_extra.get(name, 0) + by
        approver = run.resumed_by.user_id if run.resumed_by is not None else None
        root.extensions.append({"what": what, "by": by, "approved_by": approver})
        ctx.decide("extend", code="quota_exhausted", detail=f"{what} +{by} approved by {approver}")
        return spent + units <= cap + by
    return _offer(ctx, name, what, spent, cap, units)


def _offer(ctx: ToolCallContext, name: str, what: str, spent: int, cap: int, units: int) -> bool:
    """Park the call with the ledger's question: an extension offered, at
    least the call's units (a yes runs it even when calls of its batch
    spend what was left meanwhile: a yes answers what the question said)."""
    root = ctx.run.root
    by = max(ctx.config.ledgers[name].extend_by or cap - root.ledger_extra.get(name, 0), units, 1)
    if not ctx.services.shadow:  # shadow mode records the ask and the call runs: nothing is offered
        ctx.run.offers.setdefault(ctx.tool.id, {})[what] = by
    state = "is used up" if spent >= cap else f"has {cap - spent} left, this call takes {units}"
    ctx.ask(f"the {name} quota ({spent}/{cap}) {state}; approve to extend it by {by}")
    return True


def _charge(ctx: ToolCallContext) -> Callable[[], None]:
    _check_quota(ctx, admitting=True)
    policy = ctx.tool.policy
    charged = list(policy.ledgers) if policy is not None and policy.units else []
    units = policy.units if policy is not None else 0
    used = ctx.facts.ledger_used
    for name in charged:
        used[name] = used.get(name, 0) + units
    run = ctx.run  # the undo holds the run, never the context that holds it (no cycle)
    answered_before = run.answered_in
    counted = 0 if ctx.tool.meta_tool else 1
    if uncapped_answer(ctx):
        run.answered_in, counted = ctx.tool.batch, 0
    run.add_tool_call(counted)

    def refund() -> None:
        run.add_tool_call(-counted)
        if not counted:
            run.answered_in = answered_before
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
def budget_router(ctx: HookContext) -> Awaitable[None] | None:
    """Pick the model tier from the fraction of the budget left: the least
    left of money (``cap_usd`` plus approved extensions, the daily quota)
    and run-wide tokens (``max_input_tokens``, ``max_output_tokens``,
    sub-agents included), of this run's policy and of every enclosing run's
    (a sub-agent under another Harness included). At the last tier answer
    with the fallback text without calling any model, or (``on_exhausted=
    "ask"``, the run's own cap spent) ask the user to extend it
    (``budget_spent``). Then tell the model what is left when that changed
    (``disclose_budget``). A call that would overspend what is left is not
    made either: the model guard checks its estimate (``overspend``).
    Awaitable only when a parked budget is continued (its claim is a store
    call); every other round decides without a coroutine."""
    cost = ctx.config.cost
    root = ctx.run.root
    if cost is not None:
        if root.store_error is not None:
            ctx.stop("dependency_down", code="dependency_down")
            return None
        if cost.on_exhausted == "ask" and ctx.run is root and root.facts.terminal is None:
            # (a run stopped before it began, refused at open, runs nothing: the park waits)
            parked = ctx.services.approvals.parked_of(ctx.agent, root.principal)
            if parked is not None:
                return _continue_parked_budget(ctx, parked)
    _route(ctx)
    return None


def _route(ctx: HookContext) -> None:
    """The tier, or the end, that the budget left calls for (``budget_router``)."""
    facts = ctx.run.facts  # its own tier: a sub-agent under another Harness is on its own
    least = _least_left(_budget_left(ctx.run))
    if least is not None:
        lite, minimal, fallback = least.policy.tiers
        if least.fraction <= fallback:
            shadow = ctx.services.shadow
            reason, state, text = budget_spent(ctx.services, ctx.agent, ctx.run, least.kind, least.policy,
                                               "pre_think", park=not shadow)
            if shadow and state is TerminalState.WAITING_INPUT:  # nobody is asked: the question is recorded
                return
            ctx.stop(reason, state, text=text, code="quota_exhausted")
            return
        tier = "minimal" if least.fraction <= minimal else "lite" if least.fraction <= lite else "full"
        if tier != facts.tier:
            if _model_of(ctx, tier) is not _model_of(ctx, facts.tier):  # a swap only where the model changes
                ctx.decide("swap_model",
                           detail=f"{facts.tier} -> {tier} ({_what_left(least.left, least.cap, least.unit)})")
            facts.tier = tier
    _disclose(ctx)


def _model_of(ctx: HookContext, tier: str) -> Any:
    """The model that serves ``tier``: this Harness's cheaper one, else the
    agent's own. Where it does not change (the agent's own model is the
    lite one), neither the model nor the report is told of a swap."""
    cost = ctx.config.cost
    tiered = None if cost is None else cost.model_for(tier)
    return tiered if tiered is not None else getattr(ctx.agent, "model", None)


def budget_spent(
    services: Services, agent: Any, run: RunState, kind: str, policy: CostPolicy, point: str, park: bool = True,
) -> tuple[str, TerminalState, str]:
    """How a run whose budget ``policy`` is spent ends, as ``(reason, state,
    text)``: the ladder's last rung, and a model call that would overspend.
    The fallback answer (``incomplete``, ``budget``); or, when the run's own
    USD cap is spent and the policy asks, the question (``waiting_input``),
    recorded as ``budget_router``'s ``ask`` decision at ``point``, as a
    call's question is (``park``: not in shadow mode, where nobody is asked
    and the question is recorded once a run, as enforcing asks it once):
    the agent's next reply continues this budget, plus what a human approves
    (an extension raises the run's cap, never the principal's daily quota);
    never in AgentScope's ``DONT_ASK`` mode, where nobody would answer."""
    root = run.root
    if kind != "run_usd" or run is not root or policy.on_exhausted != "ask" or nobody_to_ask(agent):
        return "budget", TerminalState.INCOMPLETE, fallback(services.config, "budget", policy)
    run_cap = (policy.cap_usd or 0.0) + root.usd_extra
    spent = root.facts.spent_usd + root.usd_carried
    if park:  # a shadow run's question is only its report's end: nothing waits for it
        tokens = (root.input_tokens + root.input_carried, root.output_tokens + root.output_carried)
        services.approvals.budget_parked(agent, root.principal, spent, root.largest_output_tokens, root.usd_extra,
                                         tokens)
    reason = f"the budget of this task (${run_cap:.4f}) is used up; approve an extension to continue"
    if park or not root.budget_question_shadowed:
        services.record(run, "budget_router", point, "ask", detail=reason, enforced=park)
    if not park:
        root.budget_question_shadowed = True
    return (
        reason,
        TerminalState.WAITING_INPUT,
        (f"This task has used its budget (${spent:.4f} of ${run_cap:.4f}). " if spent >= run_cap else
         f"This task's next step would go past its budget (${spent:.4f} of ${run_cap:.4f} spent). ")
        + "Shall I continue? Continuing needs your approval of a larger budget.",
    )


class Overspend(NamedTuple):
    """A call that would take a run past a cap (``overspend``)."""

    kind: str
    """``run_usd`` or ``tokens``."""
    policy: CostPolicy
    what: str
    enforced: bool
    """The cap's Harness enforces (``False``: its own shadow-mode cap: recorded)."""


def overspend(
    run: RunState, model_name: str, input_tokens: int, output_tokens: int,
) -> Overspend | None:
    """What is passed when one call of ``model_name``, estimated at
    ``input_tokens`` in and ``output_tokens`` out, would take a run this one
    answers to past its ``cap_usd`` (plus approved extensions; kind
    ``run_usd``) or a token cap (``tokens``); ``None`` when it fits. A model
    a capped policy cannot price is refused before this (``unpriced_model``).
    One step per Harness of the nesting: this runs before every model call.
    An enforced cap passed wins over a shadow-mode one (only recorded)."""
    recorded: Overspend | None = None
    for over in _passed(run, model_name, input_tokens, output_tokens):
        if over.enforced:
            return over
        recorded = recorded or over
    return recorded


def _passed(run: RunState, model_name: str, input_tokens: int, output_tokens: int) -> Iterator[Overspend]:
    """Each cap of the runs ``run`` answers to that the call would pass."""
    for bound in run.bounds:
        cost = bound.limits.cost
        if cost is None:
            continue
        held_usd, held_input, held_output = bound.held
        price = cost.price_of(model_name) if cost.cap_usd is not None else None
        if cost.cap_usd is not None and price is not None:
            cap = cost.cap_usd + bound.usd_extra
            left = cap - bound.facts.spent_usd - bound.usd_carried - held_usd
            usd = price.usd(input_tokens, output_tokens)
            if usd > left:
                yield Overspend("run_usd", cost, (
                    f"a call estimated at ${usd:.4f} would take the spend past the cap "
                    f"(${max(left, 0.0):.4f} left of ${cap:.4f})"
                ), bound.limits.enforced)
        for limit, used, unit, tokens in (
            (cost.max_input_tokens, bound.input_tokens + bound.input_carried + held_input, "input", input_tokens),
            (cost.max_output_tokens, bound.output_tokens + bound.output_carried + held_output, "output",
             output_tokens),
        ):
            if limit is not None and used + tokens > limit:
                yield Overspend("tokens", cost, (
                    f"a call estimated at ~{tokens} {unit} tokens would pass max_{unit}_tokens "
                    f"({limit}; {used} used)"
                ), bound.limits.enforced)


class Held(NamedTuple):
    """What ``hold`` held for one call: USD per bound of its run (at that
    run's price), and its estimated tokens."""

    usd: tuple[float, ...]
    input_tokens: int
    output_tokens: int


def hold(run: RunState, model_name: str, input_tokens: int, output_tokens: int) -> Held | None:
    """Hold an admitted call's estimate on each run it answers to until it is
    charged (``release``): calls in flight at once, as parallel sub-agents
    make them, each see the others' (``overspend`` counts what is held).
    ``None`` when no run it answers to has a cap to hold against."""
    usd: list[float] | None = None
    bounds = run.bounds
    for i, bound in enumerate(bounds):
        cost = bound.limits.cost
        if cost is None or (cost.cap_usd is None and cost.max_input_tokens is None
                            and cost.max_output_tokens is None):
            continue
        if usd is None:
            usd = [0.0] * len(bounds)
        price = cost.price_of(model_name) if cost.cap_usd is not None else None
        usd[i] = price.usd(input_tokens, output_tokens) if price is not None else 0.0
    if usd is None:
        return None
    held = Held(tuple(usd), input_tokens, output_tokens)
    _add_held(run, held, 1)
    return held


def release(run: RunState, held: Held | None) -> None:
    """Give back what ``hold`` held (the call is charged, or failed)."""
    if held is not None:
        _add_held(run, held, -1)


def _add_held(run: RunState, held: Held, sign: int) -> None:
    for bound, usd in zip(run.bounds, held.usd, strict=True):
        held_usd, held_input, held_output = bound.held
        bound.held = (
            held_usd + sign * usd, held_input + sign * held.input_tokens, held_output + sign * held.output_tokens,
        )


async def _continue_parked_budget(ctx: HookContext, parked: UsdExtension) -> None:
    """A run of an agent whose last run parked on its budget continues that
    budget (so sending another message does not reset it), plus whatever a
    human approved with ``Harness.extend``. The state carrying it may be
    loaded by several replies at once (a retried request, two tabs): the
    park is claimed in the store, so one of them continues it with the
    extension; the others carry its spend, not the extension (the cap is
    as it was: they ask again). A store that does not answer stops the run
    (``dependency_down``) and leaves the parked budget in the state."""
    root = ctx.run.root
    if root.carried_park != parked.claim:  # carried before the claim: one cut short starts no fresh cap
        root.carried_park = parked.claim
        root.usd_carried += parked.carried_usd
        root.usd_extra += parked.carried_extra_usd
        root.input_carried += parked.carried_input_tokens
        root.output_carried += parked.carried_output_tokens
        root.largest_output_tokens = max(root.largest_output_tokens, parked.largest_output_tokens)
    try:
        claimed = await ctx.services.fleet.claim_parked_budget(parked.claim, ctx.run.deadline)
    except DependencyDown:
        ctx.stop("dependency_down", code="dependency_down")
        return
    ctx.services.approvals.take(ctx.agent, root.principal)
    if not claimed:
        ctx.decide("continue_budget", detail=(
            f"${parked.carried_usd:.6f} already spent by the parked run; another reply continued it "
            "(and took any extension)"
        ))
    else:
        ctx.decide("continue_budget", detail=f"${parked.carried_usd:.6f} already spent by the parked run")
        root.usd_extra += parked.usd
        for approval in parked.approvals:
            root.extensions.append({"what": "usd", **approval})
            ctx.decide("extend", code="quota_exhausted",
                       detail=f"usd +{approval['by']} approved by {approval['approved_by']}")
    _route(ctx)


class BudgetLeft(NamedTuple):
    """What is left of one budget a run answers to."""

    fraction: float
    kind: str
    """``run_usd`` (a run's own cap, extensible), ``daily_usd`` or ``tokens``."""
    left: float
    cap: float
    unit: str
    """``usd``, or ``input`` / ``output`` tokens."""
    policy: CostPolicy
    """The policy the budget is of (its tiers and fallback text apply)."""


def _budget_left(run: RunState) -> list[BudgetLeft]:
    """Each budget of the policies ``run`` answers to (its own and every
    enclosing run's, counted on the run that holds it). Numbers only: this
    runs before every model call, and is put in words only when the tier
    changes."""
    out: list[BudgetLeft] = []
    root = run.root
    for bound in run.bounds:
        cost = bound.limits.cost
        if cost is None:
            continue
        run_cap = None if cost.cap_usd is None else cost.cap_usd + bound.usd_extra
        run_left = None if run_cap is None else run_cap - bound.facts.spent_usd - bound.usd_carried
        # the principal's daily quota binds under the policy that keeps one, on the root's spend
        # (a parked run's spend it carries on is already in the store's spend for the day)
        # what was left of this policy's quota when the run opened: the tiers are fractions of it
        quota, spent_beside = cost.daily_quota_usd, root.daily_spent_usd
        daily = None if quota is None or spent_beside is None else daily_left(quota, spent_beside)
        daily_left_usd = None if daily is None else daily - root.facts.spent_usd
        if daily is not None and daily_left_usd is not None and (run_left is None or daily_left_usd < run_left):
            out.append(BudgetLeft(daily_left_usd / daily if daily > 0 else 0.0, "daily_usd", daily_left_usd,
                                  daily, "usd", cost))
        elif run_cap is not None and run_left is not None:
            out.append(BudgetLeft(run_left / run_cap if run_cap > 0 else 0.0, "run_usd", run_left, run_cap,
                                  "usd", cost))
        for limit, used, name in (
            (cost.max_input_tokens, bound.input_tokens + bound.input_carried, "input"),
            (cost.max_output_tokens, bound.output_tokens + bound.output_carried, "output"),
        ):
            if limit is not None:
                left_tokens = max(limit - used, 0)
                out.append(BudgetLeft(left_tokens / limit, "tokens", left_tokens, limit, name, cost))
    return out


def _least_left(budgets: list[BudgetLeft]) -> BudgetLeft | None:
    """The budget with the least left; between equal fractions, the first
    in the order of their words (the tier-change detail names it)."""
    if not budgets:
        return None
    fraction = min(b.fraction for b in budgets)
    tied = [b for b in budgets if b.fraction == fraction]
    return tied[0] if len(tied) == 1 else min(tied, key=lambda b: _what_left(b.left, b.cap, b.unit))


def _what_left(left: float, cap: float, unit: str) -> str:
    if unit == "usd":
        return f"{_usd(left)} of {_usd(cap)} left"
    return f"{left} of {cap} {unit} tokens left"


def _usd(value: float) -> str:
    value = max(value, 0.0)
    return f"${value:.2f}" if value >= 0.1 or value == 0 else f"${value:.4f}"


def status_line(ctx: HookContext) -> str | None:
    """What is left of the run's budget, in one line (``None``: no limits)."""
    run, config = ctx.run, ctx.config
    root = run.root
    parts: list[str] = []
    left = run.time_left()
    if left is not None:
        parts.append(f"{seconds_told(left)} left")
    parts += [_what_left(b.left, b.cap, b.unit) for b in _budget_left(run)]
    for cap, what in ((run.model_call_cap(), "model"), (run.tool_call_cap(), "tool")):
        if cap is not None:
            parts.append(f"{max(cap[1] - cap[0], 0)} {what} calls left")
    used = made(root.facts, "ledger_used") or {}
    for name, ledger in config.ledgers.items():
        units = root.ledger_cap(name, ledger.cap)
        parts.append(f"{name} {max(units - used.get(name, 0), 0)}/{units} left")
    if not parts:
        return None
    tier = run.facts.tier
    serving = config.cost.serving_tier(tier) if config.cost is not None else None
    if serving is not None and _model_of(ctx, tier) is not _model_of(ctx, "full"):
        parts.append(f"now on the {serving} model")
    return "[harness:budget] " + " \u00b7 ".join(parts)


def _budget_marks(ctx: HookContext) -> set[str]:
    """The meaningful budget events reached so far: a tier, a ledger's soft
    limit (or cap), the wrap-up window."""
    root, config = ctx.run.root, ctx.config
    tier = ctx.run.facts.tier
    marks = {f"budget:tier:{tier}"} if tier != "full" else set()
    used = made(root.facts, "ledger_used") or {}
    for name, ledger in config.ledgers.items():
        soft = root.ledger_cap(name, ledger.cap) if ledger.soft_at is None else ledger.soft_at
        if used.get(name, 0) >= soft:
            marks.add(f"budget:soft:{name}")
    wrap_up, left = ctx.wrap_up_s(), ctx.run.time_left()
    if wrap_up is not None and left is not None and left <= wrap_up:
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
        new = _budget_marks(ctx) - (made(facts, "nudged") or set())
        if not new:
            return
        facts.nudged |= new
    line = status_line(ctx)
    if line is None:
        return
    ctx.run.remember_sentinel("budget", line)
    last = facts.last_hints, facts.hinted_at
    ctx.hint(line, key=f"budget_status:{ctx.run.root.model_calls}")
    facts.last_hints, facts.hinted_at = last  # a status line is no nudge: it does not let the last one be given again


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
    state, reason = terminal_state(ctx.run, finish_required(ctx.run, ctx.config), ctx.end_reason)
    ctx.decide(
        "terminal", code=state.value,
        detail=f"{reason}; spent ${ctx.run.facts.spent_usd:.6f} in {ctx.run.model_calls} model calls",
    )

"""Repetition: the same call again, the same failure again, the same tool
over and over, the same refusal again."""

from __future__ import annotations

from collections.abc import Sequence

from ..context import HookContext, ToolCallContext
from ..lazy import made
from ..registry import HookRejectSignal, harness_hook


@harness_hook("pre_tool_call", priority=40, name="repeat_call_gate", kind="efficiency")
def repeat_call_gate(ctx: ToolCallContext) -> None:
    """Refuse an identical call that already succeeded (while its result is
    still in the context the model read: not pruned, nor compressed into
    AgentScope's summary) or that repeats within one parallel
    batch (a presumption: latches open); refuse for good a call
    that failed the same way ``max_identical_failures`` times (an exact fact).
    Also the loop detector: one tool ``loop_threshold`` times in the last
    ``loop_window`` calls gets a hint, and the same call looping on after it
    makes the run conclude."""
    call, facts, config = ctx.tool, ctx.facts, ctx.config
    digest = call.digest
    _watch_loop(ctx, digest)

    failed = (made(facts, "failures") or {}).get(digest)
    if failed is not None:
        # the run-wide count: a backstop for streaks read as broken (an id made of words)
        over = failed.total >= REPEATED_FAILURES_PER_STREAK * config.max_identical_failures
        if over or failed.streak >= config.max_identical_failures:
            times = f"{failed.total} times in this task" if over else f"{failed.streak} times in a row"
            raise HookRejectSignal(
                f"This exact call failed {times} ({failed.error_class}). "
                "Do not retry it; change the arguments or tell the user.",
                code="repeated_failure",
                hard=True,
            )
    _refuse_twin_in_batch(ctx, digest)
    ctx.admit(lambda: _claim_in_batch(ctx, digest))
    if digest in (made(facts, "done_unread") or ()):  # an exact fact: a mutation's never escapes (a card charged twice)
        raise HookRejectSignal(
            "This exact call was already made in this task (its result was withheld). "
            "Do not retry it.",
            code="duplicate_call",
            hard=call.role == "mutation",
        )
    earlier = facts.succeeded.get(digest)
    if earlier is not None and _still_read(ctx, earlier.ref):
        raise HookRejectSignal(
            "This exact call already succeeded in this task; reuse its earlier result.",
            code="duplicate_call",
            ref=earlier.ref,
        )


def _still_read(ctx: ToolCallContext, ref: str) -> bool:
    """Whether the result of call ``ref`` is still in the context the model
    read: not pruned, nor compressed into AgentScope's summary (the account
    of the context, kept at each ``pre_think``; with the tool adapter alone,
    which reads no context, a result not pruned)."""
    results = ctx.run.results
    return ref in results.live if results.rounds else ref not in results.pruned


def _refuse_twin_in_batch(ctx: ToolCallContext, digest: str) -> None:
    """Another call of this batch with the same digest was admitted (the
    same call judged again, e.g. after a confirmation, is not its own twin)."""
    facts = ctx.facts
    if facts.batch_key != ctx.tool.batch:
        facts.batch_key, facts.batch_seen = ctx.tool.batch, {}
    owner = facts.batch_seen.get(digest)
    if owner is not None and owner != ctx.tool.id:
        raise HookRejectSignal(
            "The same call appears twice in this turn; use the result of the first one.",
            code="duplicate_call",
        )


def _claim_in_batch(ctx: ToolCallContext, digest: str) -> None:
    """The first admitted call of a batch owns its digest (claimed once the
    call will run, so a call refused later does not block its twin)."""
    _refuse_twin_in_batch(ctx, digest)
    ctx.facts.batch_seen[digest] = ctx.tool.id


REPEATED_FAILURES_PER_STREAK = 2
"""An exact call failing ``max_identical_failures`` times this many times
over since it last succeeded is refused, whatever came between its failures."""


def _watch_loop(ctx: ToolCallContext, digest: str) -> None:
    facts, config, name = ctx.facts, ctx.config, ctx.tool.name
    if ctx.tool.rejudged:
        return
    facts.recent_digests.append(digest)
    count = facts.recent_tools.count(name)
    if count < config.loop_threshold:
        if made(facts, "loop_hinted"):
            facts.loop_hinted.discard(name)
        return
    if name in (made(facts, "dependency_down") or ()):
        return  # the dependency-down sentinel already says "do not retry"
    if name not in facts.loop_hinted and not facts.force_conclude:
        facts.loop_hinted.add(name)
        ctx.notice(
            f"Note: you have called {name} {count} times in your last "
            f"{len(facts.recent_tools)} calls. If it is not giving you what you need, "
            "change approach or conclude with what you have.",
        )
        return
    same = facts.recent_digests.count(digest)
    # a call whose last result was news (a poll whose job advances) is no stall
    if same >= config.loop_threshold and not facts.force_conclude and digest not in facts.news_from:
        ctx.constrain(f"the same {name} call keeps repeating after a loop hint")
        facts.stuck = facts.stuck or "stalled"


_OWN_LADDER = frozenset({"dependency_down", "run_concluded"})
"""Refusal codes the refusal ladder leaves alone: a dependency down already
constrains on the first retry (``tool_breaker_gate``); a concluded run is
stopped before its next model call."""

DENIED_ROUNDS = 3
DENIED_WINDOW = 20
"""``DENIED_ROUNDS`` rounds meeting a ``permission_denied`` within this many
turns escalate however far apart they are otherwise (a model waiting out
``stall_rounds`` between attempts); a long productive run's rare slips do not."""
_SLOW_TO_FORGET = "permission_denied"
"""The refusal progress forgets only after ``stall_rounds`` rounds without
one: a call for another user is no step of any work, so a search that
brings something new beside each attempt, or between two, does not reset
the ladder; a productive run that met one long ago is not stopped for the
next."""


def _forget_on_news(ctx: HookContext, turns: Sequence[int]) -> None:
    """A round that brought new information forgets the refusals met before
    it; a ``permission_denied`` met within ``stall_rounds`` rounds (``turns``:
    the rounds that met one) is kept."""
    facts = ctx.facts
    if facts.new_fact_this_round:
        recent = bool(turns) and ctx.run.turns - turns[-1] < ctx.config.stall_rounds
        facts.refusals_met.intersection_update({("code", _SLOW_TO_FORGET)} if recent else ())


def escalate_refusals(ctx: HookContext) -> None:
    """The ladder for refusals, run before each model call: a model that
    meets the same refusal again (same gate or same code, any arguments; a
    round that brought new information forgets earlier ones, and a
    ``permission_denied`` after ``stall_rounds`` rounds without one; the
    third round meeting one within ``DENIED_WINDOW`` turns escalates, and a
    sub-agent's counts for its lead) is
    constrained to conclude; if it keeps calling other tools, the run ends
    ``incomplete`` with reason ``refused:<code>`` (``terminal_enforcer``).
    Met again once constrained: stopped now, without another model call. Escapable presumptions (efficiency gates)
    never count: they latch open instead. Nor, until the run must conclude,
    does a refused finishing tool: narrowing the choice to it cannot help.
    Nor do refusals with a ladder of their own (``_OWN_LADDER``)."""
    facts = ctx.facts
    met_now = made(facts, "refused")
    if not met_now:  # nothing refused this round (most rounds): only what news forgets
        if made(facts, "refusals_met"):
            _forget_on_news(ctx, made(facts, "denied_turns") or ())
        return
    facts.refused = []
    denied = [(hook, code, tool) for hook, code, tool in met_now if code == _SLOW_TO_FORGET]
    turns = facts.denied_turns
    if denied:
        turns = facts.denied_turns = [*turns[-(DENIED_ROUNDS - 1):], ctx.run.turns]
    _forget_on_news(ctx, turns)
    finish, earlier = ctx.services.finish_tools, set(facts.refusals_met)
    again = None
    for hook, code, tool in met_now:  # a parallel batch meets a refusal once
        if code in _OWN_LADDER or (tool in finish and not facts.force_conclude):
            continue
        seen = (("hook", hook), ("code", code))
        if again is None and not earlier.isdisjoint(seen):
            again = code
        facts.refusals_met.update(seen)
    if again is None and denied and len(turns) == DENIED_ROUNDS and turns[-1] - turns[0] <= DENIED_WINDOW:
        again = _SLOW_TO_FORGET
    if again is None or facts.terminal is not None:
        return
    if facts.force_conclude:
        ctx.stop(f"refused:{facts.refused_again or again}", code=again)
        return
    facts.refused_again = again
    ctx.hint(
        f"That was refused again ({again}). Do not try it another way: conclude now "
        "with what you have, and tell the user what could not be done.",
        key="refused_again",
    )
    ctx.constrain(f"{again} refused again")

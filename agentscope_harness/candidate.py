"""A candidate policy judged in shadow beside the live one, on the same calls.

``Harness(config, candidate=other_config)`` runs the candidate's gates at
``pre_tool_call``, its ``pre_think`` hooks (the budget and termination
decisions) and its checks before a model call is sent (an unpriced model,
``max_request_input_tokens``, the USD and token caps, at the candidate's
prices) right after the live ones, on the same call. Every call where the
two decide differently becomes a ``candidate_differs`` decision and an entry
of ``RunReport.candidate_differences``.

The candidate enforces nothing and changes nothing the model sees: its
hints, refusals and stops are compared, then dropped. It judges each call
against what really happened in the run (what ran, what succeeded, what was
spent), mirrored from the live facts before each judgement, and keeps its own
gate state: its ledgers (charged, uncapped, with the calls that really ran,
by the candidate's own units), what the live model calls cost at its prices,
its escape latches, its model tier. It never charges the live ledgers and
never claims a breaker's half-open probe (its admissions are not run). Its
rate and concurrency limits live in a private store: a call it admits holds
its slots until the live call is over (``CallFlow.call_over``), and a rate's
wait is judged, never made.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalBook, UsdExtension
from .calls import CallFlow
from .context import HookContext, ToolCallView, nobody_to_ask
from .facts import GuardState
from .lazy import lazy_names
from .model_guard import precall_stop
from .redaction import Redactor
from .report import Decision
from .run_state import NO_LIMITS, RunLimits, RunState, RunTable
from .runner import HookRunner, Refusal
from .services import Services
from .stores import MemoryStore

if TYPE_CHECKING:
    from .config import HarnessConfig
    from .harness import Principal
    from .registry import HookSpec

_OWN = (
    "ledger_used", "gate_reject_counts", "latched", "reject_batches",
    "batch_key", "batch_seen", "tier", "nudged", "last_hints", "hinted_at", "wrap_up_hinted", "spent_usd",
)
"""Facts the candidate's own decisions make; every other fact is mirrored
from the live run before each judgement."""

_CONTAINERS = tuple(
    f.name for f in dataclasses.fields(GuardState)
    if (f.default_factory is not dataclasses.MISSING or f.name in lazy_names(GuardState)) and f.name not in _OWN
)
"""Mirrored facts that are containers: copied, so a candidate hook that
writes to one never reaches the live run."""


class _QuietServices(Services):
    """The candidate's services: decisions stay on its shadow run (no log
    line, no span event: they are not the live policy's)."""

    def record(
        self, run: RunState, hook: str, point: str, action: str, *,
        code: str | None = None, tool: str | None = None, detail: str = "", enforced: bool | None = None,
    ) -> Any:
        """Keep the decision on the shadow run only (dropped after the call);
        a candidate enforces nothing."""
        decision = Decision(hook=hook, point=point, action=action, code=code, tool=tool,
                            detail=detail, enforced=False)
        run.record(decision)
        return decision


class _QuietApprovals(ApprovalBook):
    """The candidate's approvals: its budget question parks nothing. A
    parked budget lives in the agent's state, which is the live policy's
    (a candidate's park there would be continued by the user's next task)."""

    def budget_parked(self, agent: Any, owner: Principal | None, spent_usd: float, largest_output_tokens: int,
                      extra_usd: float = 0.0, tokens: tuple[int, int] = (0, 0)) -> None:
        """Nothing is parked for the candidate."""

    def parked_of(self, agent: Any, caller: Principal | None) -> UsdExtension | None:
        """The candidate continues none of the live policy's parked budgets."""
        return None


@dataclass(eq=False)
class _Shadow:
    """The candidate's side of one live run: a run whose facts are the
    candidate's own between judgements, mirrored ones during them."""

    run: RunState
    own: GuardState
    parent: _Shadow | None
    pending: dict[str, str] = field(default_factory=dict)
    """Candidate verdicts of calls whose live admission is still to come."""


_COMPARED = "compared"
"""A pending verdict already compared (a shadow-mode ask): its admission
only counts the call that runs on the candidate's ledgers."""


class Candidate:
    """The candidate policy of a Harness."""

    def __init__(self, config: HarnessConfig, hooks: tuple[HookSpec, ...], services: Services) -> None:
        self.config = config
        self.runner = HookRunner(
            tuple(s for s in hooks if s.name not in config.disabled_hooks),
            escape_after_rejects=config.escape_after_rejects,
            hook_timeout_s=config.hook_timeout_s,
            shadow=False,
        )
        # a private store: the candidate's gates must never take a probe, a rate
        # slot or a lease from the live fleet (its limits count its own verdicts)
        quiet = _QuietServices.of(config, Redactor(config.redact_patterns, config.redact_window),
                                  MemoryStore())
        quiet.shadow = False  # it decides as if enforcing; nothing it decides is applied
        quiet.approvals = _QuietApprovals()
        quiet.fleet.waits = False
        quiet.fleet.follows_live = True  # a limit the live store judged: its verdict, in the store's order
        self.services = quiet
        self.flow = CallFlow(quiet, self.runner)  # its policy's ``ask_when``, judged as the live one's is
        self.table = RunTable(loop_window=config.loop_window, limits=RunLimits.of(config))
        self._shadows: weakref.WeakKeyDictionary[RunState, _Shadow] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------ judging

    async def judge(self, point: str, live: HookContext, refusal: Refusal | None) -> None:
        """Judge ``live``'s call (or model call) with the candidate; compare
        now, or at admission when the live gates let the call through."""
        shadow = self._shadow(live.run)
        if point == "pre_tool_call":
            view = live.tool
            assert view is not None
            verdict = await self._judge_call(shadow, live)
            refused = refusal.code if refusal is not None else live.would_refuse  # shadow mode: would have
            if refused is not None:
                self._compare(live, f"refuse:{refused}", verdict)
                if refusal is None:  # refused in shadow only: the call runs, counted on admission
                    shadow.pending[view.id] = _COMPARED
            else:  # compared at admission, or when the call is put to a human (or refused for nobody to ask)
                shadow.pending[view.id] = verdict
            return
        ctx = HookContext(point, shadow.run, self.services, live.agent)
        _mirror(shadow, live.run)
        try:
            await self.runner.run(point, ctx)
            verdict = _think_verdict(ctx)
        finally:
            _keep_own(shadow)
        self._compare(live, _think_verdict(live), verdict)

    def admitted(self, live: HookContext, refusal: Refusal | None) -> None:
        """The live admission of a call the live gates let through: compare,
        and count a call that runs on the candidate's ledgers."""
        view = live.tool
        assert view is not None
        shadow = self._shadows.get(live.run)
        verdict = shadow.pending.pop(view.id, None) if shadow is not None else None
        if shadow is None or verdict is None:
            return
        if verdict != _COMPARED:
            self._compare(live, "allow" if refusal is None else f"refuse:{refusal.code}", verdict)
        if refusal is None:
            _count_ran(shadow.run, view, self.config.tools.get(view.name))

    def asked(self, live: HookContext, outcome: str = "ask") -> None:
        """The live policy parks the call for a human (a hook's ``ctx.ask``,
        its ``ask_when``; ``outcome``: refused instead, nobody to ask):
        compare now, as such a call is never admitted."""
        view = live.tool
        assert view is not None
        shadow = self._shadows.get(live.run)
        if shadow is None:
            return
        verdict = shadow.pending.pop(view.id, None)
        if verdict is None:
            return
        if verdict != _COMPARED:  # a refusal in shadow mode was compared already
            self._compare(live, outcome, verdict)
        if live.services.shadow:  # the call runs all the same: counted on admission
            shadow.pending[view.id] = _COMPARED

    def call_over(self, live: RunState, call_id: str, ran: bool, until: asyncio.Task | None = None) -> None:
        """The live call is over (its result shaped, or it was not admitted
        or not made): the slots the candidate's gates took for it go back
        (``until``: when the live tool, left stopping, ends), and the units
        of one that did not run."""
        shadow = self._shadows.get(live)
        if shadow is not None:
            shadow.pending.pop(call_id, None)
            self.services.fleet.release_call(shadow.run, call_id, ran=ran, until=until)

    async def close_run(self, live: RunState) -> None:
        """The live run is freed: whatever the candidate still holds for it
        (a call never shaped) goes back."""
        shadow = self._shadows.get(live)
        if shadow is not None:
            await self.services.fleet.close_run(shadow.run)

    def charged(self, live: RunState, input_tokens: int, output_tokens: int, usd: float,
                model_name: str, cached_input_tokens: int) -> None:
        """A live model call's usage, on the candidate's own spend at its own
        prices (``usd``, the live price, where it has none)."""
        self._shadow(live).run.add_usage(input_tokens, output_tokens, usd, model_name, cached_input_tokens)

    def judge_model_call(self, live: RunState, services: Services, model_name: str, input_tokens: int,
                         output_tokens: int, live_stop: str | None) -> None:
        """Whether the candidate would send the model call the live checks
        sent (``live_stop`` ``None``) or stopped (its reason)."""
        shadow = self._shadow(live)
        _mirror(shadow, live)
        try:
            stop = precall_stop(shadow.run, model_name, input_tokens, output_tokens)
        finally:
            _keep_own(shadow)
        self._differs(live, services, "on_model_call", None, _sent(live_stop), _sent(stop))

    async def _judge_call(self, shadow: _Shadow, live: HookContext) -> str:
        view = live.tool
        assert view is not None
        mine = dataclasses.replace(view, policy=self.config.tools.get(view.name))
        ctx = HookContext("pre_tool_call", shadow.run, self.services, live.agent, tool=mine,
                          limits_met=live.limits_met)
        _mirror(shadow, live.run)
        try:
            refusal = await self.runner.run("pre_tool_call", ctx)
        finally:
            _keep_own(shadow)
        if refusal is not None:
            return f"refuse:{refusal.code}"
        if not await self._asks(ctx, live):
            return "allow"
        return "refuse:permission_denied" if nobody_to_ask(live.agent) else "ask"  # as the live side refuses

    async def _asks(self, ctx: HookContext, live: HookContext) -> bool:
        """The candidate policy asks about the call (a hook's ``ctx.ask``,
        its ``ask_when``), and no approval the live caller gave before
        covers it (the live store's)."""
        view = ctx.tool
        assert view is not None
        try:
            reason = ctx.ask_reason if ctx.ask_reason is not None else await self.flow.ask_when(ctx)
        except TimeoutError:
            return False  # the run's deadline passed: the live side stops the call
        if reason is None or view.resumed:
            return False
        run = live.run
        covered = await live.services.approvals.covers(
            run.principal, run.session_id, view.name, view.args,
            lambda waiting: self.runner.bounded(waiting, run.deadline),
        )
        return not covered

    def _compare(self, live: HookContext, mine: str, theirs: str) -> None:
        tool = live.tool.name if live.tool is not None else None
        self._differs(live.run, live.services, live.point, tool, mine, theirs)

    @staticmethod
    def _differs(run: RunState, services: Services, point: str, tool: str | None, mine: str, theirs: str) -> None:
        if mine == theirs:
            return
        # a verdict may carry a hook's stop reason: kept as the report keeps reasons
        mine, theirs = services.scrubbed(mine), services.scrubbed(theirs)
        code = _code(theirs) or _code(mine)
        run.candidate_differences.append(
            {"point": point, "tool": tool, "live": mine, "candidate": theirs, "code": code},
        )
        services.record(
            run, "candidate", point, "candidate_differs", code=code, tool=tool,
            detail=f"live: {mine}; candidate: {theirs}", enforced=False,
        )

    # ------------------------------------------------------------ state

    def _shadow(self, live: RunState) -> _Shadow:
        """The candidate's side of ``live``, nested as ``live`` is now (a
        sub-agent resumed from its lead's next reply is nested there since).
        Another Harness's run is mirrored under none of the candidate's caps:
        its calls are that Harness's to judge (a lead's calls never count on
        a sub-agent Harness's candidate)."""
        shadow = self._shadows.get(live)
        parent = self._shadow(live.parent) if live.parent is not None else None
        if shadow is None:
            run = self.table.open(
                live.run_id, live.agent_name, live.session_id, live.principal,
                live.deadline, parent.run if parent is not None else None, "enforce",
                None if live.table.candidate is self else NO_LIMITS,
            )
            self.table.drop(run.run_id)  # held here, for as long as the live run lives
            _carried(run, live)
            shadow = self._shadows[live] = _Shadow(run, run.facts, parent)
        elif shadow.parent is not parent:
            shadow.parent = parent
            shadow.run.nest_in(parent.run if parent is not None else None)
        return shadow


def _carried(mine: RunState, live: RunState) -> None:
    """A shadow starts from its live run's counts, its own facts included:
    the same as none for a run just opened, and for one resumed here from
    another worker's park record (its counts carried there) the best known
    (the candidate's own of before the park stayed on that worker: exact for
    a candidate equal to the live policy). A nested run's ledgers are its
    root's, shared already."""
    mine.tool_calls_total = live.tool_calls_total
    for name in _OWN:
        if name != "ledger_used" or mine.parent is None:
            setattr(mine.facts, name, copy.deepcopy(getattr(live.facts, name)))


def _mirror(shadow: _Shadow | None, live: RunState | None) -> None:
    """What really happened in the live run (and its ancestors), copied
    onto the shadow runs around the candidate's own gate state."""
    while shadow is not None and live is not None:
        facts = copy.copy(live.facts)
        for name in _CONTAINERS:
            setattr(facts, name, copy.copy(getattr(live.facts, name)))
        for name in _OWN:
            setattr(facts, name, getattr(shadow.own, name))
        mine = shadow.run
        mine.facts = facts
        for name in _MIRRORED_RUN:
            setattr(mine, name, getattr(live, name))
        shadow, live = shadow.parent, live.parent


def _keep_own(shadow: _Shadow | None) -> None:
    """Keep what the candidate's decisions changed of its own facts; drop
    everything else it wrote."""
    while shadow is not None:
        mine = shadow.run
        for name in _OWN:
            setattr(shadow.own, name, getattr(mine.facts, name))
        mine.facts = shadow.own
        mine.decisions.clear()
        mine.unflushed.clear()
        mine.issued.clear()
        shadow = shadow.parent


_MIRRORED_RUN = (
    "model_calls", "input_tokens", "output_tokens", "daily_spent_usd", "stored_usd", "store_error",
    "deadline", "principal", "usd_extra", "usd_carried", "input_carried", "output_carried",
)
"""Run counters read by gates, mirrored from the live run (the shadow keeps
its own ``tool_calls_total``)."""


def _count_ran(run: RunState, view: ToolCallView, policy: Any) -> None:
    """A call that really ran, on the candidate's ledgers and call count
    (a meta tool on its ledgers only, as the live ``spend_gate`` counts it)."""
    run.add_tool_call(0 if view.meta_tool else 1)
    if policy is None or not policy.units:
        return
    used = run.facts.ledger_used
    for name in policy.ledgers:
        used[name] = used.get(name, 0) + policy.units


def _think_verdict(ctx: HookContext) -> str:
    """What ``pre_think`` decided: no model call (and why), or the tier."""
    if ctx.fallback_answer is not None:
        terminal = ctx.run.facts.terminal
        return f"fallback:{terminal.reason if terminal is not None else 'stop'}"
    return f"model:{ctx.run.facts.tier}"


def _sent(stop: str | None) -> str:
    """A model call's verdict: sent, or not (and why)."""
    return "model:sent" if stop is None else f"fallback:{stop}"


def _code(verdict: str) -> str | None:
    kind, _, code = verdict.partition(":")
    if kind in ("refuse", "fallback"):
        return code
    return "ask" if kind == "ask" else None


__all__ = ["Candidate"]

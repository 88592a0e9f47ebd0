"""The life of one tool call, in harness terms: judged once at AgentScope's
permission point on the exact arguments the tool receives, admitted (ledgers
charged) only when every gate passed, then its result shaped by the
``post_tool_call`` hooks, whichever way it entered (executed here, run by
the client, or cut short).

No AgentScope objects here: the adapters translate to and from these views.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentscope._utils._common import _json_loads_with_repair

from .approvals import approval_digest
from .context import HookContext, ToolCallView, ToolResultView, awaited
from .errors import ErrorClass, error_class_of
from .facts import NO_DEFAULTS, NOTHING_FOUND, call_digest, thawed
from .hooks.budget import UNVERIFIED_APPROVAL, tool_calls_used_up, uncounted
from .hooks.drift import judge_news
from .hooks.termination import CONCLUDED
from .injection import shows_nothing
from .lazy import made
from .pii import find_pii
from .run_state import FINDING_CHARS
from .runner import Refusal, being_cancelled
from .sentinels import format_sentinel, unfenced, unusable_by

if TYPE_CHECKING:
    from .run_state import RunState
    from .runner import HookRunner
    from .services import Services


# Tools of AgentScope's own machinery that built-in gates never refuse: a
# structured reply cannot finish without the first.
UNGATED_TOOLS = frozenset({"GenerateStructuredOutput", "CompressContext"})

DEADLINE_PASSED = (
    "The call to {name} was not made: the run's deadline had passed. "
    "Do not retry it; tell the user."
)


@dataclass(frozen=True)
class Verdict:
    """What the gates decided about one call."""

    refusal: Refusal | None = None
    ask: str | None = None
    ctx: HookContext | None = None
    rule: str | None = None
    """Why the policy's ``ask_when`` asks (recorded once the call is put to a human)."""
    shadow_ask: bool = False
    """Shadow mode: the call would be put to a human (recorded unless
    AgentScope's engine denies it), and it runs."""

    @property
    def allowed(self) -> bool:
        """The call may run (once admitted)."""
        return self.refusal is None and self.ask is None


ID_TAKEN = (
    "The call to {name} was not made: another call of this run has the same id ({id}). "
    "Call it again if you still need it."
)
"""A call under an id another call of the run holds (judged, admitted,
running or parked): its state would take the other's place."""
PAUSED_WHILE_JUDGED = (
    "The call to {name} was not made: its reply paused while it was judged. Call it again if you still need it."
)
"""A call whose judgement began before its reply paused (parked, its stream
closed at a question, resumed): not admitted after it."""
MADE_BEFORE = (
    "The call to {name} under this id ({id}) was already made before the reply paused: it is not made "
    "again, and its result did not reach this conversation. Check its effect before you call it again."
)
"""A call met again under the id of one this run made (AgentScope runs
again, on a resume, a call that was under way when its reply parked): made
once, whatever the resume says."""
READ_OTHERWISE = (
    "The call to {name} was not made: its client runs it on the arguments as you wrote them, "
    "so they must be one JSON object, each key once, with nothing before or after it. Send it again so."
)
"""A client-executed call whose arguments a JSON reader could read other
than as the harness judged them (AgentScope's repair reads the last of two
objects, the last of repeated keys; a client's reader may take the first)."""
FINISH_WAITS = (
    "A call of this step waits for the user (an approval, or a result the client runs): "
    "deliver the answer once it is answered, written from what it says, not beside it."
)
"""A finishing tool called while a call of its run waits for a human or a
client, or in the batch of one that did: the answer was written before the
human decided."""
ANSWER_UNDER_WAY = (
    "The answer is being delivered in this same step: this call is not made, and the user "
    "is not asked about it."
)
"""A call that would be parked for a human while the run's finishing tool,
admitted in the same batch, is delivering: nobody would ever run it."""


def _written_before_a_decision(run: RunState, view: ToolCallView) -> bool:
    """A finishing tool written while a call waits for a human or a client,
    or beside one that did (in its batch): its answer could not know what
    they answered. Its own approval answers for itself only."""
    parked = made(run, "parked_calls") or {}
    others = parked.get(view.batch, set()) - {view.id}
    return bool(others) or (not view.resumed and (view.batch in parked or bool(made(run, "awaiting_human"))))


def _rule_reason(value: Any, tool: str) -> str | None:
    """Why an ``ask_when`` that returned ``value`` asks (``None``: it does
    not). A text is the reason (a blank one says which rule asks); any
    other value asks when true: ``cond and "reason"`` gives ``False`` when
    nothing needs a human, never a question titled "False". A value whose
    truth cannot be told asks (fail closed)."""
    if value is None:
        return None
    if isinstance(value, str) and not shows_nothing(value):  # a blank one shows the human nothing
        return value
    try:
        asks = isinstance(value, str) or bool(value)
    except Exception:  # an array's truth, a broken __bool__: a human decides
        asks = True
    return f"the approval rule of {tool} asks a human" if asks else None


def _why_asked(ctx: HookContext | None, rule: str | None) -> str | None:
    """The question a call is put to a human with: every hook's, then the
    policy's ``ask_when`` (``None``: nobody asks)."""
    reasons = [r for r in (ctx.ask_reason if ctx is not None else None, rule) if r is not None]
    return "; ".join(reasons) if reasons else None


class CallFlow:
    """Runs the tool points of one call for a Harness."""

    def __init__(self, services: Services, runner: HookRunner) -> None:
        self.services = services
        self.runner = runner

    # ------------------------------------------------------------- judging

    async def judge(self, run: RunState, agent: Any, view: ToolCallView) -> Verdict:
        """``pre_tool_call`` on ``view``, then whether a human must approve
        it: a hook's ``ctx.ask`` or the policy's ``ask_when``, asked only
        about a call no gate refused, skipped by a live remembered approval.
        A resumed call is re-judged by every gate and must be the very call
        the human was shown, resumed by the caller who parked it. The
        caller owns the verdict's slots and charges (gives back what a call
        not admitted took); a judging cut short drops its charges here."""
        if view.id in run.judged_calls:
            view = replace(view, rejudged=True)
        ctx = HookContext("pre_tool_call", run, self.services, agent, tool=view)
        try:
            return await self._judge(ctx, run, view)
        except BaseException:  # cancelled mid-gate: each charge refers to ctx, a cycle
            ctx.admissions.clear()
            raise

    async def _judge(self, ctx: HookContext, run: RunState, view: ToolCallView) -> Verdict:
        if not view.rejudged:  # a call judged again (after a park) is still one call
            run.judged_calls.add(view.id)
            run.facts.recent_tools.append(view.name)
        if view.agentscope_own:
            return Verdict(ctx=ctx)
        over = self._enclosing_tool_cap(ctx) or self._enclosing_ended(ctx)
        if over is not None:
            return Verdict(refusal=over, ctx=ctx)
        mismatch = self._resume_mismatch(run, view)
        refused = self._would_refuse(ctx, mismatch) if mismatch is not None else None
        if refused is not None:
            return Verdict(refusal=refused, ctx=ctx)
        concluded = run.facts.terminal is not None
        refusal = await self.runner.run("pre_tool_call", ctx)
        if refusal is None and not concluded and run.facts.terminal is not None and not self.services.shadow:
            refusal = self._stopped_by_gate(ctx)
        self._defer_hints(ctx)
        if refusal is not None:
            run.remember_sentinel(refusal.code, refusal.text)
            return Verdict(refusal=refusal, ctx=ctx)
        try:
            # the policy's own rule is asked too: a hook's question (a ledger's
            # extension) must not hide why the call itself needs a human
            by_rule = await self.ask_when(ctx)
        except TimeoutError:  # the rule took the run's time: the call is not made
            return Verdict(refusal=self.out_of_time(ctx.run, view.name), ctx=ctx)
        reason = _why_asked(ctx, by_rule)
        if view.role == "finish" and _written_before_a_decision(run, view):  # asked about or not
            waits = self._would_refuse(ctx, ("not_ready", FINISH_WAITS), hook="finish_gate")
            if waits is not None:
                return Verdict(refusal=waits, ctx=ctx)
        if reason is not None and view.resumed and not run.asked_here:
            # the human's approval was given elsewhere and cannot be compared
            # with this call: a call that needs approval is not run on it
            refused = self._would_refuse(ctx, ("approval_mismatch", UNVERIFIED_APPROVAL))
            if refused is not None:
                return Verdict(refusal=refused, ctx=ctx)
        if reason is None or (view.resumed and not ctx.asks_anew):  # resumed: approved, checked above
            return Verdict(ctx=ctx)
        if view.id not in run.offers and await self.services.approvals.covers(
            run.principal, run.session_id, view.name, view.args,
            lambda waiting: self.runner.bounded(waiting, run.deadline),
        ):
            self.services.record(run, "remembered_approval", "pre_tool_call", "allow_remembered",
                                 tool=view.name, detail=reason)
            return Verdict(ctx=ctx)
        if run.past_deadline():  # the approval's ``when`` took the run's time: nothing is asked
            return Verdict(refusal=self.out_of_time(ctx.run, view.name), ctx=ctx)
        if self.services.shadow:  # asked (recorded unless AgentScope's engine denies it), and it runs
            return Verdict(ctx=ctx, rule=by_rule, shadow_ask=True)
        under_way = self.answer_under_way(ctx)
        if under_way is not None:
            return Verdict(refusal=under_way, ctx=ctx)
        # the report states the reason: it may quote the call
        return Verdict(ask=self.services.scrubbed(reason), ctx=ctx, rule=by_rule)

    def parks(self, run: RunState, view: ToolCallView, verdict: Verdict) -> None:
        """The call is put to a human (AgentScope's own engine did not
        refuse it: a call it refuses is never asked about, nor reported
        asked): what they are shown is what a resume must match, and the
        park's reason says why (no ``verdict.ask``: AgentScope's engine asks,
        and says why itself)."""
        self.shown(run, view)
        if verdict.ask is not None:
            self.asked(run, view, verdict)
            run.asks[view.id] = verdict.ask

    def no_human_to_ask(self, run: RunState, view: ToolCallView, verdict: Verdict) -> str:
        """The sentinel of a call the harness would put to a human in a
        reply AgentScope runs with nobody to ask (its ``DONT_ASK`` mode:
        unattended, scheduled): refused, as AgentScope's engine turns its own
        asks into denials there; never parked for nobody."""
        ctx = verdict.ctx
        why = verdict.ask or _why_asked(ctx, verdict.rule)  # shadow mode's verdict carries no question
        asker = ctx.asked[0][0] if ctx is not None and ctx.asked else "ask_when"
        if self.runner.candidate is not None and ctx is not None:
            self.runner.candidate.asked(ctx, "refuse:permission_denied")
        self.services.record(run, asker, "pre_tool_call", "refuse", code="permission_denied", tool=view.name,
                             detail=f"needs a human ({why}); AgentScope's DONT_ASK mode asks nobody")
        text = format_sentinel(
            "permission_denied",
            f"{view.name} needs a human's approval ({why}), and nobody can be asked here. Do not retry it; "
            "tell the user it needs their approval.",
        )
        run.remember_sentinel("permission_denied", text)
        return text

    def asked(self, run: RunState, view: ToolCallView, verdict: Verdict) -> None:
        """Who asked about a call put to a human (in shadow mode, one that
        would be; AgentScope's engine did not deny it): each hook's
        ``ctx.ask``, in their order, then the policy's ``ask_when``."""
        ctx = verdict.ctx
        hooks = ctx.asked if ctx is not None else ()
        rule = (("ask_when", verdict.rule),) if verdict.rule is not None else ()
        for hook, why in (*hooks, *rule):
            self.services.record(run, hook, "pre_tool_call", "ask", tool=view.name, detail=why)
        if self.runner.candidate is not None and ctx is not None:  # compared with what the live policy did
            self.runner.candidate.asked(ctx)

    def answer_under_way(self, ctx: HookContext) -> Refusal | None:
        """The refusal of a call about to be parked for a human (by the
        harness or AgentScope's own engine) while the run's answer is
        delivered: a finishing tool of its batch is delivering, or has
        completed the run while this call was judged (its ``ask_when``
        awaited). Nobody would ever run it, so nobody is asked."""
        terminal = ctx.run.facts.terminal
        if terminal is not None and not self.services.shadow:  # a shadow run's end is only recorded
            return self._refuse(ctx, ("run_concluded", CONCLUDED.format(reason=terminal.reason)),
                                hook="terminal_reached_gate")
        if self.services.finish_tools.isdisjoint(ctx.run.in_flight.values()):
            return None
        return self._would_refuse(ctx, ("run_concluded", ANSWER_UNDER_WAY), hook="finish_gate")

    def _stopped_by_gate(self, ctx: HookContext) -> Refusal:
        """A gate stopped the run while judging this call (``ctx.stop``):
        the call is not made, as every later call of the run is not."""
        terminal = ctx.run.facts.terminal
        assert terminal is not None
        return self._refuse(ctx, ("run_concluded", CONCLUDED.format(reason=terminal.reason)),
                            hook="terminal_reached_gate")

    def deadline_stopped(self, run: RunState, point: str, tool: str, what: str) -> None:
        """A call the run's deadline stopped (``what``: "not made", "cut
        short"): recorded, and the deadline ends the run (shadow mode too)."""
        self.services.record(run, "liveness_watchdog", point, "stop", code="deadline", tool=tool,
                             detail=f"deadline: the call to {tool} was {what}", enforced=True)
        run.facts.time_is_up(self.services.shadow)

    def out_of_time(self, run: RunState, name: str) -> Refusal:
        """A call whose judgement (the gates, ``ask_when``, AgentScope's own
        permission engine) outlasted the run's deadline: not made."""
        self.deadline_stopped(run, "pre_tool_call", name, "not made")
        text = format_sentinel("run_concluded", DEADLINE_PASSED.format(name=name))
        run.remember_sentinel("run_concluded", text)
        return Refusal(hook="liveness_watchdog", code="run_concluded", text=text)

    def id_taken(self, run: RunState, view: ToolCallView) -> str:
        """The sentinel of a call whose id another call of the run holds
        (a provider that numbers or repeats ids): recorded, never run."""
        return self._id_refused(run, view, ID_TAKEN, f"call id {view.id!r} is held by another call")

    def made_before(self, run: RunState, view: ToolCallView) -> str:
        """The sentinel of a call met again on a resume under the id of one
        this run made (``RunState.made``): recorded, never made twice."""
        return self._id_refused(run, view, MADE_BEFORE, f"call id {view.id!r} was made before the reply parked")

    def judged_across_park(self, run: RunState, view: ToolCallView) -> str:
        """The sentinel of a call whose judgement began before its reply
        paused (``RunState.pauses``): not made (the reply moved on without
        it; its resume judges the call afresh, here or on another worker),
        recorded."""
        return self._id_refused(run, view, PAUSED_WHILE_JUDGED, "judged across a pause of its reply: not made")

    def _id_refused(self, run: RunState, view: ToolCallView, said: str, detail: str) -> str:
        """A ``duplicate_call`` refusal of the call-id check, recorded as
        enforced: shadow mode keeps it too (the harness keeps a call's state
        by its id; a second call there would take the first one's place)."""
        text = format_sentinel("duplicate_call", said.format(name=view.name, id=view.id))
        self.services.record(run, "call_id_check", "pre_tool_call", "refuse", code="duplicate_call",
                             tool=view.name, detail=detail, enforced=True)
        run.remember_sentinel("duplicate_call", text)
        return text

    def read_otherwise(self, run: RunState, view: ToolCallView) -> str | None:
        """The sentinel of a client-executed call whose arguments, as
        written, are not the one reading it was judged on: recorded, never
        handed to the client (``None`` in shadow mode: recorded only; and for
        a tool the caller cannot use whatever its arguments, unrecorded: the
        authorization gate, when on, answers it ``permission_denied``, never
        how to send it again)."""
        identity = view.policy.identity_args if view.policy is not None else None
        if "authorization_gate" in self.runner.by_name and unusable_by(view.name, run.principal, identity) is not None:
            return None
        self.services.record(run, "client_arguments_check", "pre_tool_call", "refuse", code="bad_arguments",
                             tool=view.name, detail="arguments a client could read otherwise than as judged")
        if self.services.shadow:
            return None
        text = format_sentinel("bad_arguments", READ_OTHERWISE.format(name=view.name))
        run.remember_sentinel("bad_arguments", text)
        return text

    def changed_before_judged(self, run: RunState, view: ToolCallView) -> str | None:
        """The sentinel of a call whose arguments a middleware before the
        harness changed on their way to it: the tool receives AgentScope's
        own parse, so the gates would judge another call (recorded; ``None``
        in shadow mode: recorded only)."""
        self.services.record(run, "arguments_check", "pre_tool_call", "refuse", code="policy_error", tool=view.name,
                             detail="a middleware before the harness changed the arguments it judges")
        if self.services.shadow:
            return None
        text = format_sentinel("policy_error", ARGUMENTS_CHANGED.format(name=view.name))
        run.remember_sentinel("policy_error", text)
        return text

    def call_over(self, run: RunState, call_id: str, ran: bool, until: asyncio.Task | None = None) -> None:
        """A call is over: its result shaped, or it was not admitted, or not
        made (``ran`` false): the slots its gates took go back (``until``: a
        tool the run stopped waiting for holds them until its task ends),
        the rate units of one that did not run too; the candidate's alike."""
        self.services.fleet.release_call(run, call_id, ran=ran, until=until)
        candidate = self.runner.candidate
        if candidate is not None:
            candidate.call_over(run, call_id, ran, until)

    def shown(self, run: RunState, view: ToolCallView) -> None:
        """A call parked for a human (by the harness or by AgentScope's own
        permission engine): what they are shown is what a resume must match."""
        run.approvals[view.id] = (view.name, approval_digest(view.name, view.args))
        run.asked_here = True

    async def ask_when(self, ctx: HookContext) -> str | None:
        """The policy's ``ask_when`` on the call's arguments (sync or async,
        within ``hook_timeout_s`` and the deadline); one that fails asks
        (fail closed: a human decides). ``TimeoutError``: the deadline passed."""
        view, rule = _policy_callable(ctx, "ask_when")
        if rule is None:
            return None
        try:
            reason = await self._bounded(ctx, rule, thawed(view.args))
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                raise  # the caller's cancellation, not the rule's failure
            if isinstance(exc, TimeoutError) and ctx.run.past_deadline():
                raise
            self.services.log_failure(f"ask_when of {view.name}", exc)
            reason = f"the approval rule of {view.name} failed ({type(exc).__name__})"
        return _rule_reason(reason, view.name)

    def _resume_mismatch(self, run: RunState, view: ToolCallView) -> tuple[str, str] | None:
        """A resumed call is refused unless the caller bound now is the one
        who parked it and its arguments are exactly those the human was
        shown (an edit the human made goes through ``Harness.approve_edit``)."""
        if not view.resumed:
            return None
        if not run.asked_here:
            # parked in another process (state restored from storage): nothing
            # here to compare with; every gate still judges the call
            self.services.record(run, "resume_check", "pre_tool_call", "resume_unverified", tool=view.name,
                                 detail="the park was not seen by this process")
            return None
        if run.resumed_by_another():
            return ("permission_denied", "This call was approved for another user. Do not retry.")
        run.spent_approvals.add(view.id)  # answered once: a park never offers it again (an old copy of the state)
        if run.approvals.pop(view.id, None) != (view.name, approval_digest(view.name, view.args)):
            return (
                "approval_mismatch",
                "These arguments differ from what the user approved. Do not retry; "
                "ask the user again.",
            )
        return None

    def _would_refuse(self, ctx: HookContext, why: tuple[str, str], hook: str = "resume_check") -> Refusal | None:
        """A refusal of the harness's own checks (a resume's, the finishing
        tool's), recorded; in shadow mode it refuses nothing (the call runs,
        as it would without the harness)."""
        refusal = self._refuse(ctx, why, hook)
        if not self.services.shadow:
            return refusal
        ctx.would_refuse = ctx.would_refuse or refusal.code
        return None

    def _enclosing_tool_cap(self, ctx: HookContext) -> Refusal | None:
        """In shadow mode: the refusal when an enclosing enforcing Harness's
        ``max_tool_calls`` is reached (a shadow sub-agent spends the live
        parent's calls; its own ``spend_gate`` only records). Checked when
        the call is judged and again at admission (parallel calls)."""
        if not self.services.shadow or ctx.tool is None or uncounted(ctx):
            return None
        calls = ctx.run.tool_call_cap(enforced_only=True)
        if calls is None or calls[0] < calls[1]:
            return None
        ctx.run.enclosing_refusals.add(ctx.tool.batch)  # met in two turns: the model guard ends the run
        return self._refuse(ctx, ("quota_exhausted", tool_calls_used_up(calls)), hook="spend_gate", enforced=True)

    def _enclosing_ended(self, ctx: HookContext) -> Refusal | None:
        """The refusal of a sub-agent's call once a run it is nested in was
        stopped short of its task (``RunState.enclosing_end``): the call is
        part of that stopped task (shadow mode too, as the lead's enforcing
        Harness stopped it)."""
        end = ctx.run.enclosing_end()
        if end is None:
            return None
        return self._refuse(ctx, ("run_concluded", CONCLUDED.format(reason=end.reason)),
                            hook="terminal_reached_gate", enforced=True)

    def _refuse(
        self, ctx: HookContext, why: tuple[str, str], hook: str = "resume_check", enforced: bool | None = None,
    ) -> Refusal:
        code, text = why
        sentinel = format_sentinel(code, text)
        ctx.services.record(ctx.run, hook, "pre_tool_call", "refuse", code=code,
                            tool=ctx.tool.name if ctx.tool else None, detail=text, enforced=enforced)
        ctx.run.remember_sentinel(code, sentinel)
        return Refusal(hook=hook, code=code, text=sentinel)

    def admit(self, verdict: Verdict) -> Refusal | None:
        """Charge what the gates asked for and count the call as running.
        Synchronous: the last check and the charge see the same state."""
        ctx = verdict.ctx
        assert ctx is not None and ctx.tool is not None
        refusal = self._enclosing_tool_cap(ctx) or self.runner.admit(ctx)
        if refusal is not None:
            ctx.run.remember_sentinel(refusal.code, refusal.text)
            return refusal
        run, view = ctx.run, ctx.tool
        run.facts.called_tools[view.name] += 1
        run.in_flight[view.id] = view.name
        run.admitted[view.id] = ctx
        run.made[view.id] = view.batch
        return None

    # ------------------------------------------------------------- shaping

    async def shape(self, ctx: HookContext, result: ToolResultView) -> ToolResultView:
        """The ``post_tool_call`` chain on a result, then the call's outcome
        recorded as facts. Returns the result the model will read."""
        run, view = ctx.run, ctx.tool
        assert view is not None
        ctx.point = "post_tool_call"
        ctx.result = result
        if result.state != "interrupted":  # else its effect is unknown: the report keeps it in flight
            run.in_flight.pop(view.id, None)
        self.call_over(run, view.id, ran=True)  # nothing waits on it now, whatever its state
        if result.error_class != ErrorClass.DEPENDENCY_DOWN:
            self._attach_pending_notices(ctx)
        found = NOTHING_FOUND
        if result.ok and view.digest not in run.facts.succeeded:
            counted = await self._count_results(ctx, result.raw_text)
            found = run.facts.found_in(view.role, result.raw_text, result.harness_meta, counted)
            result.new_facts = found.edges
            for fact in found.edges:  # the model reads it only after this batch
                run.facts.fact_batches[fact] = view.batch
        ran = result.ok
        refusal = await self.runner.run("post_tool_call", ctx)
        self.services.fleet.shaped(run, view.id)
        self._defer_hints(ctx)
        if refusal is not None:  # the model reads none of it: it brought nothing
            run.remember_sentinel(refusal.code, refusal.text)
            result.text, result.notices, result.state = refusal.text, [], "error"
            result.withheld = True
            run.facts.unreach(found)
        else:
            heard = result.heard
            if heard is not None and (result.heard_of is not result.text or heard.at != run.facts.novelty.kept):
                # a hook rewrote it after the tracker (news is what the model reads), or a parallel
                # call's result was remembered since (the hooks between may give the loop turns):
                # judged again, and remembered with no await between
                judge_news(ctx, result, view)
            run.facts.credit(found, result.news)
            if result.heard is not None:
                run.facts.hear(view.digest, result.heard)
        withheld = refusal is not None and refusal.code in WITHHELD_DONE
        done_unread = ran and withheld
        # a mutation that timed out may have taken effect, its error text withheld or not: its outcome is
        # unknown, as a withheld result's
        timed_out = (refusal is None or withheld) and view.role == "mutation" and (
            result.error_class == ErrorClass.TIMEOUT_UNKNOWN)
        unconfirmed = WITHHELD if done_unread else TIMED_OUT if timed_out else None
        if timed_out:  # told so (DESIGN: timeout_unknown, it may have happened)
            result.notices.append(f"{view.name} timed out: it may have taken effect. Check before you call it again.")
        succeeded = result.ok and not result.failed_verify  # (shadow mode keeps a failed verify's success shown)
        if succeeded and unconfirmed is None:
            _keep_finding(run, view, result)
        error = result.error_class or ErrorClass.TOOL_ERROR
        run.facts.record_outcome(
            view.name, view.digest, view.args, view.id, succeeded,
            # a call made whose result was withheld did not fail: no streak of failures counts it
            str(getattr(error, "value", error)) if result.state == "error" and not done_unread else None,
            self.services.keys_of(view.name), view.batch,
            # a prerequisite's values as the tool ran with them: its defaults filled in
            view.declared.defaults if view.declared is not None else NO_DEFAULTS,
            changed_state=view.role == "mutation", said=result.text,
        )
        if unconfirmed is not None:
            made_unconfirmed(run, view, unconfirmed)
        if done_unread:  # and the same call again is not made
            run.facts.done_unread.add(view.digest)
        if succeeded and unconfirmed is None:
            run.tell_enclosing_runs(view.name, _as_run(view))
        return result

    async def _count_results(self, ctx: HookContext, text: str) -> int | None:
        """The policy's ``count_results`` on a successful result, within
        ``hook_timeout_s`` and the deadline (``None``: not configured, or it
        failed: the defaults apply)."""
        view, counter = _policy_callable(ctx, "count_results")
        if counter is None:
            return None
        try:
            return int(await self._bounded(ctx, counter, text))
        except Exception as exc:
            self.services.log_failure(f"count_results of {view.name}", exc)
            return None

    async def _bounded(self, ctx: HookContext, fn: Callable[[Any], Any], arg: Any) -> Any:
        """A policy's callable (sync or async) on ``arg``, bounded as an async
        hook is: by ``hook_timeout_s`` and the run's deadline."""
        return await self.runner.bounded(awaited(fn(arg)), ctx.run.deadline)

    def _defer_hints(self, ctx: HookContext) -> None:
        """A tool point's hints reach the model before its next call, given
        by the next ``pre_think`` (one between a call and its result would
        break the provider's message order)."""
        if ctx.hints and not self.services.shadow:
            ctx.run.deferred_hints.extend(ctx.hints)
        ctx.hints.clear()

    def _attach_pending_notices(self, ctx: HookContext) -> None:
        assert ctx.result is not None and ctx.tool is not None
        for hook, text in ctx.pending_notices:
            ctx.result.notices.append(text)
            self.services.record(ctx.run, hook, "pre_tool_call", "hint", tool=ctx.tool.name,
                                 detail=text)
        ctx.pending_notices.clear()

    async def unjudged(self, run: RunState, agent: Any, call: Any) -> HookContext:
        """The context of a client-executed result whose awaited ``call``
        was not admitted here (a reply parked in another process, or the
        tool adapter not installed): shaped all the same, judged by nothing,
        under the call's name (never the one the client gives its result),
        with its arguments as AgentScope reads them (what its success is
        filed under: a prerequisite's, a repeat's), in the batch of the turn
        it was made in (no model turn has begun since it was asked for: a
        call of that same turn, acted on next, did not read it)."""
        state = agent.state
        tool, args = await read_as_agentscope(agent, call) or (None, {})
        view = ToolCallView(id=call.id, name=call.name, args=args, policy=self.services.config.tools.get(call.name),
                            batch=(state.reply_id, state.cur_iter, run.turns),
                            declared=self.services.declared(call.name, tool))
        return HookContext("post_tool_call", run, self.services, agent, tool=view)


async def tool_run_as(agent: Any, name: str) -> Any:
    """The tool AgentScope runs a call of ``name`` with: the toolkit's of the
    active groups (``check_tool_available``), as ``Agent._execute_tool_call``
    resolves it (``get_tool`` searches every group: an inactive one's tool of
    that name, with another schema, would be read instead); ``None``: none."""
    toolkit = getattr(agent, "toolkit", None)
    context = getattr(getattr(agent, "state", None), "tool_context", None)
    if toolkit is None or context is None:
        return None
    try:
        return await toolkit.check_tool_available(name, context.activated_groups)
    except Exception:  # no such tool active: AgentScope answers the call with its own error
        return None


async def read_as_agentscope(agent: Any, call: Any) -> tuple[Any, dict[str, Any]] | None:
    """The tool of a call in the agent's toolkit, and the call's arguments
    as AgentScope reads them (with that tool's schema); ``None`` when it
    could not read them."""
    try:
        tool = await agent.toolkit.get_tool(call.name)  # a call made earlier: its group may be inactive now
        schema = getattr(tool, "input_schema", None)
        args = _json_loads_with_repair(call.input, schema) if isinstance(call.input, str) else call.input
    except Exception:
        return None
    return (tool, dict(args)) if isinstance(args, dict) else None


def _policy_callable(ctx: HookContext, name: str) -> tuple[ToolCallView, Callable[[Any], Any] | None]:
    """The call being judged or shaped, and its policy's callable ``name``
    (``ask_when``, ``count_results``; ``None``: not configured)."""
    view = ctx.tool
    assert view is not None
    return view, getattr(view.policy, name) if view.policy is not None else None


WITHHELD_DONE = frozenset({"pii_blocked", "injection_blocked"})
"""Refusals of a result for what it says, not for what the call did: the
call was made (it is not made again), its outcome unconfirmed (the checks
after the refusal, ``verify`` too, never judged it)."""


WITHHELD = "made; its result was withheld, so whether it went through is not confirmed"
TIMED_OUT = "made; it timed out, so whether it went through is not confirmed"
CUT_AT_DEADLINE = "started; the time ran out before it ended, so whether it went through is not confirmed"
"""What a stopped run's answer says of a call made whose outcome is unknown."""


def _as_run(view: ToolCallView) -> Any:
    """A call's arguments as the tool ran with them: its declared defaults filled in."""
    defaults = view.declared.defaults if view.declared is not None else NO_DEFAULTS
    return {**defaults, **view.args} if defaults else view.args


def made_unconfirmed(run: RunState, view: ToolCallView, said: str) -> None:
    """A call made whose outcome is unknown (its result withheld, a
    mutation that timed out or that the deadline cut): a claim of it is
    corrected as unconfirmed ("check before you try it again"), here and in
    every run it is nested in, and a mutation is among what a stopped run
    did, said so."""
    args = _as_run(view)
    run.facts.unconfirmed.setdefault(view.name, []).append(args)
    run.tell_enclosing_runs(view.name, args, confirmed=False)
    if view.role == "mutation" and not view.agentscope_own:
        _acted(run, view.name, said)


def _keep_finding(run: RunState, view: ToolCallView, result: ToolResultView) -> None:
    """A successful call in what a stopped run's answer hands over: a
    mutation among what it did, any other result among what it found; one
    whose result reads as instructions to the model named without its text."""
    if view.role in ("finish", "ask") or view.agentscope_own:
        return
    said = "(its result read as instructions to the model: not quoted)" if result.suspect else _finding(result.text)
    if view.role == "mutation":
        _acted(run, view.name, said)
    else:
        run.findings.append((view.name, said))


def _acted(run: RunState, tool: str, said: str) -> None:
    """A mutation among what a stopped run did, in every run it is nested in
    too: a sub-agent's action is the conversation's."""
    acting: RunState | None = run
    while acting is not None:
        acting.actions.append((tool, said))
        acting = acting.parent


def _finding(shaped: str) -> str:
    """A short line of a result as the model read it: already redacted and
    its tool's ``pii`` applied whole by ``content_filter``, so the cut never
    reveals part of a secret; never cut inside a value of any personal-data
    kind either (the answer's ``pii`` finds no half of one: a card's last
    digits cut off pass no checksum); the fence lines are left out."""
    head = unfenced(shaped[:_FINDING_READ])  # a megabyte's words split and joined whole held the loop
    line = " ".join(head.split())
    cut = FINDING_CHARS
    if len(line) > cut:
        start = max(cut - _VALUE_REACH, 0)
        across = [f for f in find_pii(line[start:cut + _VALUE_REACH]) if f.start < cut - start < f.end]
        cut = start + across[0].start if across else cut
    return line[:cut] + ("…" if len(line) > cut or len(shaped) > _FINDING_READ else "")


_VALUE_REACH = 320
"""How far a personal-data value may reach across a finding's cut (an
e-mail address at its longest)."""


_FINDING_READ = 65_536
"""The most of a result read for its finding line."""


ARGUMENTS_CHANGED = (
    "The call to {name} was not made: its arguments could not be checked as the tool would receive them. "
    "Do not retry it; tell the user."
)


async def as_made(agent: Any, call: Any, judged: Any, tool: Any) -> tuple[str, Any] | None:
    """The call AgentScope will run, as ``(its arguments text, its tool)``,
    when a permission middleware before the harness's handed on ``call``,
    ``judged`` and ``tool``: AgentScope runs its own block of the call (in the
    agent's context, whatever copy a middleware passed on), with the
    toolkit's tool of its name, on its own parse of its text with that
    tool's schema. ``None``: the call handed on is not that one (renamed,
    its arguments changed, another tool's schema), or its text is none of
    several calls under its id (a provider numbering ids per message).
    *Limit:* a middleware rewriting both the copy and the arguments into a
    sibling's exactly is not told apart."""
    blocks = _stored_calls(agent, call.id)
    named = [block for block in blocks if block.name == call.name]
    if blocks and not named:  # renamed on its way: it would be judged as another tool than the one run
        return None
    texts = [str(block.input) for block in named]
    if call.input in texts:  # AgentScope hands the chain a copy of its block: that block's own text
        texts = [call.input]
    elif len(texts) > 1:  # a copy changed, and several calls under this id: which one runs cannot be told
        return None
    texts = texts or [call.input]  # judged outside a reply: as given
    own = await tool_run_as(agent, call.name)
    tool = own if own is not None else tool
    schema = getattr(tool, "input_schema", None)
    text = next((text for text in texts if _reads_as(text, judged, schema)), None)
    return None if text is None else (text, tool)


def _reads_as(written: str, judged: Any, schema: Any) -> bool:
    """AgentScope's parse of ``written`` (with the tool's ``schema``: it
    repairs a valid JSON's types too, ``"no"`` read as ``false``) is
    ``judged``, value for value and type for type (``1`` is no ``true``)."""
    try:
        read = _json_loads_with_repair(written, schema) if schema is not None else json.loads(written)
    except Exception:  # AgentScope read the call before judging it: a text it cannot read is not the call's
        return False
    return same_data(read, judged)


def same_data(a: Any, b: Any) -> bool:
    """``a == b`` with the types of JSON's values told apart (Python reads
    ``True == 1 == 1.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_data(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)  # NaN, read twice, is still NaN


def _stored_calls(agent: Any, call_id: str) -> list[Any]:
    """The calls of this id in the newest message of the agent's context
    that holds one."""
    state = getattr(agent, "state", None)
    for msg in reversed(getattr(state, "context", None) or ()):
        if isinstance(msg.content, str):
            continue
        blocks = [block for block in msg.content if getattr(block, "type", None) == "tool_call" and block.id == call_id]
        if blocks:
            return blocks
    return []


def result_view(
    text: str, state: str, metadata: dict[str, Any], has_data: bool = False, data_names: tuple[str, ...] = (),
    data_digests: tuple[int, ...] = (),
) -> ToolResultView:
    """A result as hooks see it. The error class comes from metadata the
    harness's tool middleware (or the tool itself) set, never from text a
    tool could forge."""
    error_class = error_class_of(metadata) if state == "error" else None
    return ToolResultView(
        text=text, state=state, metadata=metadata, error_class=error_class,
        has_data=has_data, raw_text=text, data_names=data_names, data_digests=data_digests,
    )


__all__ = [
    "DEADLINE_PASSED", "UNGATED_TOOLS", "CallFlow", "Verdict", "call_digest", "result_view",
]

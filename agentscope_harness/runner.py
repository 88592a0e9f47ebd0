"""Runs the hooks of one point: priority order, a refusal ends the chain, the
escape latch of efficiency gates, the failure policy (safety fails closed,
the rest fail open), shadow mode (decide and record, enforce nothing) and
admission (charges made only once every gate of a call has passed).

A refusal at a point that judges no call (``pre_think``, ``post_reflect``,
``on_system_prompt``) cannot be answered with a sentinel: it stops the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .context import HookContext
from .deadline import MIN_TIMEOUT_S
from .errors import being_cancelled
from .outputs import quoted_pii, quoted_shown, result_pii, shaped_notice, written_by_hook
from .redaction import Turns, shaped_within
from .registry import HOOK_POINTS, TOOL_POINTS, HookRejectSignal, HookSpec, malformed
from .sentinels import format_sentinel, neutralise_markers

if TYPE_CHECKING:
    from .candidate import Candidate

CANDIDATE_POINTS = frozenset({"pre_tool_call", "pre_think"})
"""Where a candidate policy is judged beside the live one."""

_STOPPING_POINTS = frozenset({"pre_think", "post_reflect", "on_system_prompt"})

log = logging.getLogger("agentscope_harness")

_timeout = getattr(asyncio, "timeout", None)


@dataclass(frozen=True)
class Refusal:
    """A call the chain refused: the sentinel text the model will read."""

    hook: str
    code: str
    text: str


def _stop(ctx: HookContext, spec: HookSpec, code: str) -> None:
    """A refusal at a point that judges no call stops the run (in shadow
    mode recorded as the end enforcing would have made, nothing enforced)."""
    ctx.hook_name = spec.name
    ctx.stop("policy_error" if code == "policy_error" else "policy_refused", code=code)


def _applies(spec: HookSpec, policy: Any, config: Any) -> bool:
    """Whether ``spec`` can act on a call with ``policy`` (a failing
    ``when`` keeps the hook: it then runs, and fails by its own policy)."""
    if spec.when is None:
        return True
    try:
        return bool(spec.when(policy, config))
    except Exception:
        log.warning("harness hook %s: its when= predicate failed; the hook runs", spec.name)
        return True


class _Resumed:
    """The rest of a coroutine whose first step has run and is waiting on
    ``pending``: awaiting this drives it on, in the awaiting task, passing
    the event loop's wake-ups and cancellations through."""

    __slots__ = ("coro", "pending")

    def __init__(self, coro: Any, pending: Any) -> None:
        self.coro, self.pending = coro, pending

    def __await__(self) -> Any:
        coro, pending = self.coro, self.pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation (the timeout's): the coroutine handles it
                try:
                    pending = coro.throw(exc)
                except StopIteration as done:
                    return done.value
                continue
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value


def _synchronous(undo: Any) -> Any:
    """A charge's value, which must be no awaitable, nor an async undo: a
    charge runs with no await between the gates' last check and it, so an
    async one would never run (its cap silently off). It fails its hook."""
    if inspect.isawaitable(undo) or inspect.iscoroutinefunction(undo):
        if inspect.iscoroutine(undo):
            undo.close()
        raise TypeError("ctx.admit: a charge (and its undo) must be synchronous, not async")
    return undo


def first_step(coro: Any) -> tuple[bool, Any]:
    """Run a coroutine's first step now: ``(True, its value)`` when it
    finished without waiting (most hooks, tools and scripted calls), else
    ``(False, the rest)`` to await. A timer armed only for the rest costs
    nothing on the common path, and none could fire before the first wait."""
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return True, done.value
    return False, _Resumed(coro, pending)


async def _shape_written(ctx: HookContext, before: str, notes: tuple[Any, ...]) -> None:
    """What a user's ``post_tool_call`` hook wrote into the result the model
    reads (its text, its notices, ``before`` and ``notes`` before the hook)
    is shaped as a notice is (``written_by_hook``; a notice appended
    directly, as ``ctx.notice`` shapes it): the harness's shaping may run
    before it, never be gone around by it."""
    result = ctx.result
    assert result is not None
    if type(result.text) is not str or result.text != before:
        modes, salt = result_pii(ctx.tool.policy if ctx.tool is not None else None, ctx.run)
        text = result.text if type(result.text) is str else before
        result.text = await written_by_hook(before, text, ctx.services.redactor, modes, salt)
    if type(result.notices) is not list or len(result.notices) != len(notes) or any(
        new is not old for new, old in zip(result.notices, notes, strict=False)
    ):
        result.notices = [
            note if index < len(notes) and note is notes[index] else _as_notice(ctx, note)
            for index, note in enumerate(result.notices if isinstance(result.notices, list) else notes)
        ]


def _as_notice(ctx: HookContext, note: Any) -> str:
    """A notice a hook put in the list itself, shaped as ``ctx.notice`` shapes one."""
    policy = ctx.tool.policy if ctx.tool is not None else None
    return shaped_notice(note if type(note) is str else str(note), ctx.services.redactor, policy, ctx.run)


def _returned(value: Any) -> Exception:
    """What a hook that returned ``value`` (a hook returns ``None``) is
    taken to have raised: a returned ``HookRejectSignal`` is its refusal;
    anything else is its failure, never silently dropped."""
    if isinstance(value, HookRejectSignal):
        return value
    return TypeError(
        f"the hook returned {type(value).__name__}; a hook returns None "
        "(raise HookRejectSignal to refuse)",
    )


AUDIT_HOOK = "final_answer_audit"
"""The one hook that writes ``HookContext.audit`` (what it read and gave)."""
OUTCOME_HOOK = "strategy_feedback"
"""The hook that records how a run ends as its last decision."""


def _put_back(
    ctx: HookContext, tool: Any, answer: str | None, audit: Any,
    result: tuple[Any, str | None, str | None, tuple[Any, ...]], hook: str,
) -> Exception | None:
    """A hook replaced the call being judged (the tool receives AgentScope's
    own call, so the gates after it would judge another) or the result, or
    set its text to something not text or its notices to something not a
    list, or wrote the tool's own text (``raw_text``: the harness's shaping, before
    and after it, shapes the result the model reads, and tells a result it
    changed from the tool's own: either would go around it), set the answer
    to something not text, or wrote the audit's record (which tells the
    lifecycle whether a rewrite needs auditing again): each is put back, all
    of them, and the hook has failed."""
    wrong: list[str] = []
    if ctx.tool is not tool:
        ctx.tool = tool
        wrong.append("replaced ctx.tool; the call being judged is read-only")
    given, raw, text, notices = result
    if text is not None and type(given.text) is not str:
        wrong.append(f"set ctx.result.text to {type(given.text).__name__}; it must be a str")
        given.text = text
    if text is not None and type(given.notices) is not list:
        wrong.append(f"set ctx.result.notices to {type(given.notices).__name__}; append to the list instead")
        given.notices = list(notices)
    if ctx.result is not given:
        ctx.result = given
        wrong.append("replaced ctx.result; write ctx.result.text or ctx.result.notices instead")
    if raw is not None and given.raw_text is not raw:
        given.raw_text = raw
        wrong.append("wrote ctx.result.raw_text; the tool's own text is read-only")
    if ctx.audit is not audit and hook != AUDIT_HOOK:
        ctx.audit = audit
        wrong.append("wrote ctx.audit; only final_answer_audit records the audit")
    if answer is not None and type(ctx.final_text) is not str:
        wrong.append(f"set final_text to {type(ctx.final_text).__name__}; it must be a str")
        ctx.final_text = answer
    return TypeError("the hook " + " and ".join(wrong)) if wrong else None


def _appended_only(ctx: HookContext, own: list[str], additions: list[str]) -> Exception | None:
    """Whether a hook at ``on_system_prompt`` only appended text to its own
    copy of ``ctx.prompt_addition`` (the prompt is joined from it): one that
    replaced it, edited what others wrote or put in no text has failed."""
    kept = len(additions)
    if ctx.prompt_addition is own and own[:kept] == additions and all(type(item) is str for item in own[kept:]):
        return None
    return TypeError("the hook changed ctx.prompt_addition other than by appending text to it")


def _refusal_text(ctx: HookContext, signal: HookRejectSignal) -> str:
    """What the model (and the user's stream) reads of a refusal: a gate's
    message may quote a secret, or the call's arguments (``same_args``), so
    it is redacted like any text the model reads and its personal data is
    rewritten as the streamed arguments' is (``quoted_pii``), but for the
    signed-in user's own identity values: what the model must send. It may
    quote a tool's output too (at ``post_tool_call``), read outside the
    fence: markers someone else wrote are defanged, but in a ``raw`` one
    (the hook's own words, verbatim). Read to ``REFUSAL_CHARS``."""
    redactor = ctx.services.redactor
    modes, salt = quoted_pii(ctx.config, ctx.tool.policy if ctx.tool is not None else None, ctx.run)
    own = _own_values(ctx.run.principal)
    message = shaped_within(signal.message, REFUSAL_CHARS,
                            lambda text: quoted_shown(redactor.redact(text), modes, salt, own))
    return message if signal.raw else format_sentinel(signal.code, neutralise_markers(message), signal.ref)


REFUSAL_CHARS = 16_384
"""The most of a refusal's message the model reads (one quoting a megabyte
would hold the event loop while shaped)."""


def _own_values(principal: Any) -> frozenset[str]:
    """The signed-in user's identity values (``user_id``, ``tenant``, extra
    attributes) as text."""
    if principal is None:
        return frozenset()
    values = [principal.user_id, principal.tenant, *(principal.model_extra or {}).values()]
    return frozenset(str(v) for v in values if v is not None)


async def within(awaitable: Any, limit: float | None) -> Any:
    """Await ``awaitable`` for at most ``limit`` seconds (``None``: no
    bound): in this task (no extra task per call, as ``wait_for`` would
    create) where asyncio has ``timeout`` (3.11+). One that swallows its
    timeout's cancellation and returns anyway timed out all the same
    (``TimeoutError``): its value came too late to count."""
    if limit is None:
        return await awaitable
    if _timeout is None:  # pragma: no cover - Python 3.10
        return await asyncio.wait_for(awaitable, limit)
    if inspect.iscoroutine(awaitable):
        # most async hooks finish without waiting (a memory store, a small
        # result): their first step runs unarmed, a timer only for one that waits
        started = time.monotonic()
        done, awaitable = first_step(awaitable)
        if done:
            return awaitable
        limit -= time.monotonic() - started  # its first step counts too
    return await rest_within(awaitable, limit)


async def rest_within(rest: Any, limit: float) -> Any:
    """``rest`` (an awaitable, or the rest of a coroutine whose first step
    waits: ``first_step``) awaited for at most ``limit`` seconds."""
    if limit <= 0 and isinstance(rest, _Resumed):  # its first step took all the time
        rest.coro.close()
        raise TimeoutError
    assert _timeout is not None  # read only where asyncio has it (3.11+)
    async with _timeout(limit) as bound:
        value = await rest
    if bound.expired():  # it caught the timeout's cancellation and returned: it failed
        raise TimeoutError
    return value


TURN_OVER = 8192
"""A tool result longer than this (characters, as the model reads it) gives
the event loop a turn between ``post_tool_call`` hooks whenever they have
held it ``redaction.SLICE_S``."""


class HookRunner:
    """Per-point hook lists, sorted once at construction."""

    def __init__(
        self,
        specs: Iterable[HookSpec],
        escape_after_rejects: int,
        hook_timeout_s: float | None,
        shadow: bool,
    ) -> None:
        specs = list(specs)
        self.by_point: dict[str, tuple[HookSpec, ...]] = {
            point: tuple(sorted((s for s in specs if s.point == point), key=lambda s: s.sort_key))
            for point in HOOK_POINTS
        }
        self.escape_after_rejects = escape_after_rejects
        self.hook_timeout_s = hook_timeout_s
        self.shadow = shadow
        self.by_name = {s.name: s for s in specs}
        self.candidate: Candidate | None = None
        """A candidate policy judged after the live hooks of its points
        (``Harness(candidate=...)``); it never changes the live outcome."""
        self._for_tool: dict[tuple[str, str | None], tuple[HookSpec, ...]] = {}
        self._conditional = {
            point: any(s.when is not None for s in self.by_point[point]) for point in TOOL_POINTS
        }

    def for_tool(self, point: str, ctx: HookContext) -> tuple[HookSpec, ...]:
        """``point``'s hooks that can act on this tool call: those whose
        ``when`` holds for the tool's policy, decided once per configured
        tool (all unconfigured tools share one list)."""
        tool = ctx.tool
        assert tool is not None
        policy = tool.policy
        key = (point, tool.name if policy is not None else None)
        specs = self._for_tool.get(key)
        if specs is None:
            config = ctx.config
            specs = self._for_tool[key] = tuple(
                s for s in self.by_point[point] if _applies(s, policy, config)
            )
        return specs

    async def run(self, point: str, ctx: HookContext) -> Refusal | None:
        """Run ``point``'s hooks on ``ctx``; the enforced refusal, if any."""
        specs = (
            self.for_tool(point, ctx)
            if ctx.tool is not None and self._conditional.get(point)
            else self.by_point[point]
        )
        return await self._chain(point, specs, ctx)

    async def rerun(self, name: str, ctx: HookContext) -> Refusal | None:
        """Run the hook ``name`` once more on ``ctx`` (an audit of what a
        later hook wrote), with the same failure policy."""
        spec = self.by_name[name]
        return await self._chain(spec.point, (spec,), ctx)

    async def _chain(self, point: str, specs: tuple[HookSpec, ...], ctx: HookContext) -> Refusal | None:
        result_read = ctx.result if point == "post_tool_call" else None  # by the model: shaped
        raw = result_read.raw_text if result_read is not None else None  # the tool's own: read-only
        prompting = point == "on_system_prompt"
        additions = ctx.prompt_addition
        # each hook reads a long result whole: their sum, not one of them, would hold the loop
        turns = Turns() if result_read is not None and len(result_read.text) > TURN_OVER else None
        for spec in specs:
            # the harness's own hooks write only what they may: what a hook may
            # not change is checked, and put back, after a hook of yours
            trusted = spec.builtin
            ctx.hook_name, ctx.hook_builtin = spec.name, trusted
            if not trusted:
                tool, answer, audit, given = ctx.tool, ctx.final_text, ctx.audit, ctx.result
            shadowed = ctx.would_refuse
            before = result_read.text if result_read is not None and not trusted else None
            notes = tuple(result_read.notices) if result_read is not None and before is not None else ()
            own, finished = additions, False
            if prompting:  # a copy of its own: an edit of what another hook wrote is seen, and fails it
                own = ctx.prompt_addition = list(additions)
            try:
                try:
                    result = spec.fn(ctx)
                    if result is not None and inspect.isawaitable(result):
                        result = await within(result, self._limit(ctx.run.deadline))  # not bounded(): one frame less
                    if result is not None:
                        raise _returned(result)
                finally:  # however the hook ended, what it may not change is put back
                    broken = None if trusted else (
                        _put_back(ctx, tool, answer, audit, (given, raw, before, notes), spec.name)
                        if ctx.tool is not tool or ctx.audit is not audit or ctx.result is not given
                        or (answer is not None and type(ctx.final_text) is not str)
                        or (result_read is not None and result_read.raw_text is not raw)
                        or (before is not None and result_read is not None
                            and (type(result_read.text) is not str or type(result_read.notices) is not list))
                        else None
                    )
                    if broken is None and prompting:
                        broken = _appended_only(ctx, own, additions)
                if broken is not None:
                    raise broken
            except HookRejectSignal as signal:
                refusal = self._refused(spec, signal, ctx)
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise
                refusal = self._failed(spec, exc, ctx)  # the hook's own (it awaited a cancelled task)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # any other is the hook's failure (escaping, the call would run again)
                refusal = self._failed(spec, exc, ctx)
            else:
                refusal, finished = None, True
            if prompting:  # what a prompt hook that finished appended; one that did not adds nothing
                ctx.prompt_addition = additions
                if finished:
                    additions.extend(own[len(additions):])
            if before is not None:  # however the hook ended (a write, then a raise): what the model reads is shaped
                await _shape_written(ctx, before, notes)
            if refusal is not None:
                ctx.admissions.clear()
                if point in _STOPPING_POINTS:
                    _stop(ctx, spec, refusal.code)
                break
            if shadowed is None and ctx.would_refuse is not None and point in _STOPPING_POINTS:
                _stop(ctx, spec, ctx.would_refuse)  # shadow mode: the end enforcing would have made, reported
            if turns is not None:
                await turns.take()
        else:
            refusal = None
        if self.candidate is not None and point in CANDIDATE_POINTS:
            await self.candidate.judge(point, ctx, refusal)
        return refusal

    def admit(self, ctx: HookContext) -> Refusal | None:
        """Make the charges the gates of a call asked for, in their order,
        with no await in between: all of them, or (when one re-check
        refuses) none, and that refusal."""
        undos: list[Callable[[], None]] = []
        for hook, charge in ctx.admissions:
            spec = self.by_name[hook]
            ctx.hook_name, ctx.hook_builtin = hook, spec.builtin
            try:
                undo = _synchronous(charge())
            except HookRejectSignal as signal:
                refusal = self._refused(spec, signal, ctx)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # a charge never awaits: a CancelledError here is its own
                refusal = self._failed(spec, exc, ctx)
            else:
                if callable(undo):  # any other value (a counter's next ticket) has nothing to undo
                    undos.append(undo)
                continue
            if refusal is not None:
                for undo in reversed(undos):
                    undo()
                break
        else:
            refusal = None
            ctx.refunds = tuple(reversed(undos))  # given back if the admitted call is never made
        ctx.admissions.clear()
        if self.candidate is not None and ctx.tool is not None:
            self.candidate.admitted(ctx, refusal)
        return refusal

    def _limit(self, deadline: float | None) -> float | None:
        """The sooner of ``hook_timeout_s`` and the run's deadline, in
        seconds from now (``None``: neither bounds it)."""
        limit = self.hook_timeout_s
        if deadline is not None:
            left = max(deadline - time.monotonic(), MIN_TIMEOUT_S)
            limit = left if limit is None else min(limit, left)
        return limit

    async def bounded(self, awaitable: Any, deadline: float | None) -> Any:
        """Await an async hook (or a policy's async callable) ``within``
        ``hook_timeout_s`` and the run's deadline. Returns its value."""
        return await within(awaitable, self._limit(deadline))

    def _refused(self, spec: HookSpec, signal: HookRejectSignal, ctx: HookContext) -> Refusal | None:
        """A hook's refusal; one whose fields were made wrong after it was
        raised (a ``code`` of 403) is the hook's failure, never a crash of the reply."""
        problem = malformed(signal.message, signal.code, signal.ref)
        if problem is not None:
            return self._failed(spec, TypeError(f"HookRejectSignal: {problem}"), ctx)
        return self._rejected(spec, signal, ctx)

    def _rejected(
        self, spec: HookSpec, signal: HookRejectSignal, ctx: HookContext,
    ) -> Refusal | None:
        facts = ctx.run.facts
        tool = ctx.tool.name if ctx.tool else None
        key = spec.escape_key
        if key is not None and not signal.hard:
            if key in facts.latched:
                return None
            if facts.gate_reject_counts[key] >= self.escape_after_rejects:
                facts.latched.add(key)
                ctx.services.record(
                    ctx.run, spec.name, spec.point, "allow_escape",
                    code=signal.code, tool=tool,
                    detail=f"latched open after {facts.gate_reject_counts[key]} refusals",
                )
                return None
            batch = ctx.tool.batch if ctx.tool else ("", -1, -1)
            if (key, batch) not in facts.reject_batches:
                facts.reject_batches.add((key, batch))
                facts.gate_reject_counts[key] += 1
        text = _refusal_text(ctx, signal)
        ctx.services.record(
            ctx.run, spec.name, spec.point, "refuse",
            code=signal.code, tool=tool, detail=signal.message,
        )
        if key is None or signal.hard:  # a presumption latches open instead; shadow mode's climbs the ladder too
            met = (spec.name, signal.code, tool)
            facts.refused.append(met)
            if signal.code == "permission_denied" and ctx.tool is not None and ctx.tool.identity_bound:
                ctx.run.met_by_enclosing_runs(met, enforced=not self.shadow)
        if self.shadow:
            ctx.would_refuse = ctx.would_refuse or signal.code
            return None
        return Refusal(hook=spec.name, code=signal.code, text=text)

    def _failed(self, spec: HookSpec, exc: BaseException, ctx: HookContext) -> Refusal | None:
        timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
        if not timed_out:
            what = f"raised {type(exc).__name__}: {exc}"
        elif ctx.run.past_deadline():  # the sooner bound of the two
            what = "timed out at the run's deadline"
        else:
            what = f"timed out after {self.hook_timeout_s}s"
        what = ctx.services.scrubbed(what)  # an exception's message may quote what the call carried
        log.warning("harness hook %s at %s %s", spec.name, spec.point, what)
        tool = ctx.tool.name if ctx.tool else None
        ctx.services.record(
            ctx.run, spec.name, spec.point, "error",
            code="policy_error", tool=tool, detail=what,
        )
        if not spec.fail_closed:
            return None  # fail open
        text = format_sentinel(
            "policy_error",
            f"The safety check {spec.name} could not run, so this was withheld. "
            "Do not retry it; tell the user it could not be done now.",
        )
        # shadow mode refuses nothing, but data protection stays on: what the model reads of a result
        protects = spec.kind == "transform" and spec.point == "post_tool_call"
        ctx.services.record(
            ctx.run, spec.name, spec.point, "refuse",
            code="policy_error", tool=tool, detail="fail-closed", enforced=protects or not self.shadow,
        )
        if ctx.tool is not None:  # a refusal the model meets again climbs the ladder, as a gate's does
            ctx.run.facts.refused.append((spec.name, "policy_error", tool))
        if self.shadow and not protects:
            ctx.would_refuse = ctx.would_refuse or "policy_error"
            return None
        return Refusal(hook=spec.name, code="policy_error", text=text)

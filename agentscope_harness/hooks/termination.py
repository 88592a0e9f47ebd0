"""Termination: a run ends, on time, and says honestly how it ended."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from typing import Any

from ..context import STRUCTURED_OUTPUT_TOOL, HookContext, ReflectContext, ToolCallContext, ToolResultContext
from ..deadline import MIN_TIMEOUT_S, seconds_told
from ..facts import FINISHED, OUT_OF_TIME, GuardState, finish_required
from ..outputs import shaped_notice
from ..redaction import shaped_within
from ..registry import HookRejectSignal, harness_hook
from ..report import RunReport, TerminalState
from ..run_state import SHORT_ENDS
from ..runner import REFUSAL_CHARS, being_cancelled, within
from ..sentinels import format_sentinel
from .repetition import escalate_refusals

_STOPPED = (TerminalState.INCOMPLETE.value, TerminalState.FAILED.value)
"""Ends that stop the run at its next step (a failed compression's model
error is met there; the reasoning step's ends the reply at once)."""


@harness_hook("pre_think", priority=5, name="liveness_watchdog", kind="observer")
def liveness_watchdog(ctx: HookContext) -> None:
    """Stop a run that is out of time, out of model calls, or already
    concluded; near the deadline, constrain it to conclude; a refusal met
    again climbs the ladder (``escalate_refusals``). A run whose
    finishing tool completed ends with that tool's answer at once: the
    extra model round AgentScope would make is neither paid for nor able
    to turn a finished task into an apology. Past the deadline, a run whose
    ``ask`` tool asked the user ends with its question."""
    facts = ctx.facts
    terminal = facts.terminal
    if ctx.services.shadow and terminal is not None and ctx.run.past_deadline():
        facts.time_is_up(shadow=True)  # an end shadow mode did not enforce gives way
        terminal = facts.terminal
    if terminal is not None and (terminal.state in _STOPPED or facts.stop_text is not None):
        # a stop (a hook's, whatever state it asked for) answers with its text at the next step
        ctx.stop(terminal.reason, TerminalState(terminal.state), text=facts.stop_text)
        return
    answer = facts.ended_by_tool()
    if answer is not None and terminal is not None and (
        ctx.run.past_deadline()  # the model has no time to relay it
        # a completed run's answer stands (a structured output still owed
        # gets its narrowed rounds first: the agent adapter's)
        or terminal.state == TerminalState.COMPLETED.value
    ):
        ctx.stop(terminal.reason, TerminalState(terminal.state), text=answer)
        return
    if ctx.run.model_calls_spent() is not None:  # every enclosing run's cap, whichever Harness opened it
        ctx.stop("max_model_calls")
        return
    escalate_refusals(ctx)
    if facts.terminal is not None:
        return
    if facts.undelivered >= ctx.config.stall_rounds:
        # the ladder's top: told to conclude, its finishing tool failed (or failed its
        # ``verify``) ``stall_rounds`` times: no conclusion is coming
        ctx.stop(_ignored(facts))
        return
    left = ctx.run.time_left()
    if left is None:
        return
    if left <= 0:
        ctx.stop(OUT_OF_TIME)
        return
    wrap_up = ctx.wrap_up_s()
    if wrap_up is not None and left <= wrap_up and not facts.wrap_up_hinted:
        facts.wrap_up_hinted = True
        ctx.hint(
            f"Only {seconds_told(left)} are left for this task. Conclude now with what you have.",
            key="conclude",
        )
        ctx.constrain(f"wrap-up: {left:.1f}s left", code="deadline")


def _ignored(facts: GuardState) -> str:
    """The reason a run that ignored being told to conclude is stopped with."""
    if facts.dependency_down:
        return "dependency_down"
    if facts.stuck is not None:
        return facts.stuck
    if facts.refused_again:
        return f"refused:{facts.refused_again}"
    return facts.constrained_for or "stalled"


CONCLUDED = "This task is already concluded ({reason}). Do not call more tools; answer the user now."
"""What a call of a concluded run answers (``run_concluded``)."""


@harness_hook("pre_tool_call", priority=5, name="terminal_reached_gate", kind="safety")
def terminal_reached_gate(ctx: ToolCallContext) -> None:
    """Once the run is terminal, no more tools: answer the user. (A later
    gate that stops the run refuses its own call: ``CallFlow``.)"""
    terminal = ctx.facts.terminal
    if terminal is not None:
        raise HookRejectSignal(CONCLUDED.format(reason=terminal.reason), code="run_concluded")


@harness_hook(
    "post_tool_call", priority=30, name="mark_terminal", kind="observer",
    when=lambda policy, config: policy is not None and policy.role in ("finish", "ask"),
)
def mark_terminal(ctx: ToolResultContext) -> Any:
    """A finishing tool that succeeded and passed ``verify`` completes the
    run; a failed verification becomes an error saying what is missing. A
    successful ``ask`` tool leaves the run waiting for the user.

    Synchronous on the hot path (every tool call); only an async ``verify``
    makes it return an awaitable, which the runner awaits."""
    result, call = ctx.result, ctx.tool
    if call.policy is None:
        return None
    if not result.ok:
        if call.role == "finish":
            undelivered(ctx.facts)
        return None
    if call.role == "ask":
        ctx.facts.tool_answer = _answer_of(call.args, result.raw_text)
        ctx.facts.conclude(TerminalState.WAITING_INPUT, "asked_user")
        ctx.decide("terminal", code="waiting_input")
        return None
    if call.role != "finish":
        return None
    verify = call.policy.verify
    if verify is not None:
        try:
            missing = verify(result.raw_text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a check that cannot run passes nothing (fail closed)
            missing = _unchecked(ctx, exc)
        if inspect.isawaitable(missing):
            return _verified_later(ctx, missing)
        if missing:
            _verification_failed(ctx, missing)
            return None
    _completed(ctx)
    return None


VERIFY_SHARE = 0.8
"""The share of this hook's time bound (``hook_timeout_s``, the deadline)
an async ``verify`` may take: timed out within it, its failure is recorded
here, as a failed check, before the runner's bound would end the hook."""


async def _verified_later(ctx: ToolResultContext, pending: Any) -> None:
    try:
        missing = await within(pending, _verify_within(ctx))  # a check that swallows its timeout: timed out
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # raised (a cancelled lookup's error too), or timed out: fail closed
        missing = _unchecked(ctx, exc)
    if missing:
        _verification_failed(ctx, missing)
    else:
        _completed(ctx)


def _verify_within(ctx: ToolResultContext) -> float | None:
    limit = ctx.config.hook_timeout_s
    if ctx.run.deadline is not None:
        left = max(ctx.run.deadline - time.monotonic(), MIN_TIMEOUT_S)
        limit = left if limit is None else min(limit, left)
    return None if limit is None else limit * VERIFY_SHARE


def _unchecked(ctx: ToolResultContext, exc: BaseException) -> str:
    """What the model reads of a ``verify`` that raised or timed out: its
    result is not delivered (a check that cannot run passes nothing). The
    run's own cancellation is not the check's: it goes on."""
    if isinstance(exc, asyncio.CancelledError) and being_cancelled():
        raise exc
    why = "took too long" if isinstance(exc, TimeoutError) else f"failed ({type(exc).__name__})"
    ctx.services.log_failure(f"verify of {ctx.tool.name}", exc)
    return f"The result could not be checked: its check {why}, so it was not delivered."


def _verification_failed(ctx: ToolResultContext, missing: Any) -> None:
    call, result = ctx.tool, ctx.result
    # ``verify`` reads the tool's own text and may quote it: shaped as any notice, outside the fence
    said = shaped_within(str(missing), REFUSAL_CHARS,
                         lambda text: shaped_notice(text, ctx.services.redactor, call.policy, ctx.run))
    line = format_sentinel("verification_failed", f"{said} Fix this and call {call.name} again.")
    ctx.run.remember_sentinel("verification_failed", line)
    result.failed_verify = True  # the run's facts count no success, in shadow mode too
    if not ctx.services.shadow:  # shadow mode records it: the tool's own success stands, as without the harness
        result.state = "error"
    result.notices.append(line)
    ctx.decide("refuse", code="verification_failed", detail=str(missing))
    undelivered(ctx.facts)


def undelivered(facts: GuardState) -> None:
    """A finishing call that did not deliver (it failed, failed ``verify``,
    or AgentScope refused its arguments) once the run was told to conclude:
    counted towards the ladder's top (``liveness_watchdog``)."""
    if facts.force_conclude:
        facts.undelivered += 1


def _completed(ctx: ToolResultContext) -> None:
    facts = ctx.facts
    facts.tool_answer = _answer_of(ctx.tool.args, ctx.result.raw_text)
    facts.mark(FINISHED)
    if facts.stuck is not None:
        # made to conclude for lack of progress: what it delivers then does not complete the task
        facts.conclude(TerminalState.INCOMPLETE, facts.stuck)
        ctx.decide("terminal", code="incomplete", detail=f"delivered once made to conclude ({facts.stuck})")
        return
    short = _fell_short_inside(ctx)
    if short is not None:  # what it delivers was made without what that run could not do
        facts.conclude(TerminalState.INCOMPLETE, short.reason)
        ctx.decide("terminal", code="incomplete", detail=f"delivered what {short.agent} could not complete")
        return
    facts.delivered = True
    facts.conclude(TerminalState.COMPLETED, FINISHED)
    ctx.decide("terminal", code="completed")


def _answer_of(args: Mapping[str, Any], result_text: str) -> str:
    """What a finishing or ``ask`` tool delivered: its one text argument
    (e.g. ``submit_answer(answer=...)``, ``ask_user(question=...)``), else
    its result."""
    texts = [v for v in args.values() if isinstance(v, str)]
    return texts[0] if len(args) == 1 and len(texts) == 1 else result_text


@harness_hook("post_reflect", priority=60, name="terminal_enforcer", kind="observer")
def terminal_enforcer(ctx: ReflectContext) -> None:
    """The model tried to end without the required finishing tool: one more
    round with a nudge, then ``incomplete``. A model that keeps calling other
    tools after being told to conclude is stopped."""
    facts, out = ctx.facts, ctx.model_output
    finish = ctx.services.finish_tools
    if (
        facts.force_conclude
        and facts.terminal is None
        and facts.forced_at is not None
        and ctx.run.root.model_calls > facts.forced_at
        and any(name not in finish and name != STRUCTURED_OUTPUT_TOOL for name, _ in out.tool_calls)
    ):
        facts.conclude(TerminalState.INCOMPLETE, _ignored(facts))
        ctx.decide("terminal", code="incomplete", detail="kept calling tools after being told to conclude")
        return
    if not out.is_final or facts.terminal is not None or not finish_required(ctx.run, ctx.config):
        return
    if facts.enforce_retries < ctx.config.max_enforce_retries:
        facts.enforce_retries += 1
        names = " or ".join(sorted(finish)) or "the finishing tool"
        ctx.hint(
            f"The task is not finished: call {names} to deliver the result. "
            "A plain text answer does not complete it.",
            key="finish_required",
        )
        ctx.constrain("answered in text while a finishing tool is required", code="finish_tool_not_called")
        ctx.another_round = "finish_tool_not_called"
        return
    facts.conclude(TerminalState.INCOMPLETE, "finish_tool_not_called")
    ctx.decide("terminal", code="incomplete", detail="finish tool not called")



def _fell_short_inside(ctx: ToolResultContext) -> RunReport | None:
    """The last sub-agent the finishing call ran, when it ended short of its
    task (``incomplete``, ``failed``) under an enforcing Harness: the delivery
    is the product of that run (a retry that completed stands for the
    attempt before it; a shadow Harness's end is only recorded)."""
    nested = [r for r in ctx.run.ended_inside.get(ctx.tool.id, ()) if r.mode != "shadow"]
    return nested[-1] if nested and nested[-1].terminal_state.value in SHORT_ENDS else None

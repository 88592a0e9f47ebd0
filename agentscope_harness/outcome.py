"""How a run ended and what the user receives: one function of the run's
facts. Hooks state intent (``stop``, ``constrain``, the finishing tool's
success); only the lifecycle calls this, once, when the run settles.

Leaving the loop is not success: ``completed`` needs the finishing tool to
have succeeded and been verified (where one is required) and no unsupported
claim in the answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .context import found_so_far, reason_words
from .facts import finish_required
from .lazy import made
from .outputs import cleaned_args
from .report import RunReport, TerminalState
from .run_state import RunState, principal_dict

if TYPE_CHECKING:
    from .config import HarnessConfig

WITHHELD_ANSWER = (
    "I'm sorry, I could not produce an answer I can stand behind. "
    "Please try again."
)


def terminal_state(
    run: RunState,
    finish_required: bool,
    end_reason: str | None,
    failure: BaseException | None = None,
) -> tuple[TerminalState, str]:
    """The terminal state and reason a run has earned, from its facts."""
    if isinstance(failure, (asyncio.CancelledError, GeneratorExit)):
        return TerminalState.CANCELLED, "cancelled"
    facts = run.facts
    if failure is not None:
        if facts.terminal is not None and facts.terminal.state == TerminalState.FAILED.value:
            return TerminalState.FAILED, facts.terminal.reason
        return TerminalState.FAILED, f"error: {type(failure).__name__}: {failure}"  # cut once scrubbed
    if end_reason == "interrupted":
        return TerminalState.CANCELLED, "interrupted"
    if facts.terminal is not None and facts.terminal.state != TerminalState.COMPLETED.value:
        return TerminalState(facts.terminal.state), facts.terminal.reason
    if facts.stuck is not None:
        # made to conclude because it made no progress: whatever it answered then
        return TerminalState.INCOMPLETE, facts.stuck
    if facts.unsupported_claims:
        return TerminalState.INCOMPLETE, "unsupported_claim"
    if facts.terminal is not None:
        if run.ended_at_cap:  # finished, but the structured output the reply owed never came
            return TerminalState.INCOMPLETE, "structured_output_missing"
        if finish_required and not facts.delivered:  # a hook's stop is not the delivery
            return TerminalState.INCOMPLETE, "finish_tool_not_called"
        return TerminalState.COMPLETED, facts.terminal.reason
    if facts.dependency_down:
        # the answer may be honest, but the task was not done
        return TerminalState.INCOMPLETE, "dependency_down"
    if end_reason == "exceed_max_iters":
        return TerminalState.INCOMPLETE, "max_iters"
    if finish_required:
        return TerminalState.INCOMPLETE, "finish_tool_not_called"
    return TerminalState.COMPLETED, "answered"


def answer_is_replaced(run: RunState) -> bool:
    """Whether ``corrected_answer`` replaces whatever the model answers now
    (the run was made to conclude for lack of progress, or a dependency it
    needed went down): known before the answer, so a stream holds it back.
    An end another rule gives in that answer's own round comes after the
    answer: the adapter marks it made up then (``RunState.answer_made_up``)."""
    facts = run.facts
    return facts.terminal is None and (facts.stuck is not None or bool(made(facts, "dependency_down")))


def finish_bypassed(run: RunState, config: HarnessConfig) -> bool:
    """The run ended because the model answered in text where it owes a
    finishing tool, past the nudge (``terminal_enforcer``): that answer went
    around the tool and its ``verify``, so it is not given. (A rule that
    stopped the run in that answer's round gives its stop text instead:
    ``overrules_answer``.)"""
    terminal = run.facts.terminal
    return terminal is not None and terminal.reason == "finish_tool_not_called" and finish_required(run, config)


def overrules_answer(run: RunState, config: HarnessConfig) -> bool:
    """A rule ended the run, with a text of its own, in the round of the
    model's answer (a ``post_reflect`` ``ctx.stop`` on the final answer):
    that text is the answer, not the model's (the adapter marks it
    ``answer_made_up``), when the stop falls short of the task
    (``incomplete``, ``failed``) or the run owes a finishing tool (only it
    delivers); a stop that completes the run, or leaves it waiting, lets
    the answer stand."""
    terminal = run.facts.terminal
    if terminal is None or run.facts.stop_text is None:
        return False
    if terminal.state in (TerminalState.INCOMPLETE.value, TerminalState.FAILED.value):
        return True
    return terminal.state == TerminalState.COMPLETED.value and not run.facts.delivered and finish_required(run, config)


def structured_output_is_withheld(run: RunState) -> bool:
    """Whether the reply's structured output is withheld: it asserts an
    action whose tool never succeeded (the correction is the answer, as for
    text); or, made after a dependency the run needed went down, it is made
    without its data (the reply ends with the fallback answer instead),
    whatever rule ended the run in the round that made it
    (``RunState.answer_made_up``)."""
    facts = run.facts
    if facts.unsupported_claims:
        return True
    return bool(made(facts, "dependency_down")) and (facts.terminal is None or run.answer_made_up)


def replacement(run: RunState, fallback_text: str) -> str:
    """What the user receives instead of an answer the model gave while
    ``answer_is_replaced``: the fallback answer the run ends with
    (``fallback_text`` saying why the answer is replaced, and what the run
    found); or, when a rule ended the run in that answer's own round (a
    ``post_reflect`` ``ctx.stop``), the text that rule stopped it with, as
    a stop anywhere else gives it at the run's next step."""
    facts = run.facts
    if facts.stop_text is not None:
        return facts.stop_text
    why = facts.stuck or ("dependency_down" if facts.dependency_down else "finish_tool_not_called")
    return fallback_text.format(reason=reason_words(why)) + found_so_far(run)


def unanswered(run: RunState, fallback_text: str) -> str:
    """What the user receives when a run that would end ``completed`` says
    nothing (``no_answer``): the fallback answer, and what the run found."""
    return fallback_text.format(reason=reason_words("no_answer")) + found_so_far(run)


def corrected_answer(run: RunState, text: str, config: HarnessConfig) -> str:
    """The answer the user may receive, as ``terminal_state`` judges the
    run: one that asserts an action whose tool never succeeded in the run
    is replaced by a correction saying what did not happen (the report names
    the claim); the model's own answer once it was made to conclude for lack
    of progress (``stalled``, ``cycling``), or after a dependency it needed
    went down, by the fallback answer that run ends with (``replacement``),
    as its report says ``incomplete``, also when another rule ended the run
    in that answer's own round (``RunState.answer_made_up``): a model left
    without its data is the one most tempted to make the answer up; and one
    given in text around a required finishing tool (``finish_bypassed``)."""
    fallback_text = config.fallback_text
    bypassed = finish_bypassed(run, config)
    replaced = answer_is_replaced(run) or run.answer_made_up or bypassed
    facts = run.facts
    if replaced and (facts.stuck is not None or facts.stop_text is not None or bypassed):
        return replacement(run, fallback_text)  # the answer is not given: a correction of it would not be either
    claims = run.facts.unsupported_claims
    if not claims:
        return replacement(run, fallback_text) if replaced else text
    steps = facts.claimed_steps
    failed = list(dict.fromkeys(step for step, done in steps if done is False))
    unknown = [step for step in dict.fromkeys(step for step, done in steps if done is None) if step not in failed]
    if not failed and not unknown:
        failed = list(dict.fromkeys(claims))
    done = [step for step in dict.fromkeys(step for step, ok in steps if ok) if step not in failed + unknown]
    said = [
        f"{_listed(failed)} did not succeed in this conversation, so that has not been done." if failed else "",
        f"I cannot confirm that {_listed(unknown)} went through: its result could not be shown. "
        "Check before you try it again." if unknown else "",
        f"What did succeed: {_listed(done)}." if done else "",
        "Please try again or ask for help." if failed else "",
    ]
    return "I have to correct myself: " + " ".join(part for part in said if part)


STEPS_LISTED = 10
"""Claimed steps a correction names of each kind; more are counted."""


def _listed(steps: list[str]) -> str:
    more = len(steps) - STEPS_LISTED
    return ", ".join(steps[:STEPS_LISTED]) + (f" and {more} more" if more > 0 else "")


def build_report(
    run: RunState, state: TerminalState, reason: str, agent_name: str, mode: str, scrub: Callable[[str], str],
) -> RunReport:
    """The report of a run, from its slot; the principal's attributes and
    the approvers of extensions as ``scrub`` states any record (an identity
    attribute may be an email)."""
    now = time.monotonic()
    return RunReport(
        run_id=run.run_id,
        session_id=run.session_id,
        agent=agent_name,
        principal=cleaned_args(principal_dict(run.principal), scrub, numbers=True),
        terminal_state=state,
        reason=reason,
        model_calls=run.model_calls,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        spent_usd=round(run.facts.spent_usd, 10),
        tool_calls=dict(run.facts.called_tools),
        refusals=dict(run.refusals),
        refusals_by_hook=dict(run.refusals_by_hook),
        decisions=list(run.decisions),
        wall_s=round(now - run.started, 6),
        deadline_left_s=None if run.deadline is None else round(run.deadline - now, 6),
        in_flight=run.still_running(),
        unsupported_claims=list(run.facts.unsupported_claims),
        facts=sorted({scrub(fact) for fact in run.facts.progress_marks}),  # a tool's words: its data in them
        children=list(run.children),
        extensions=cleaned_args(list(run.extensions), scrub),  # an approver's user_id may be an email
        mode=mode,
        prefix_breaks=run.prefix_breaks,
        candidate_differences=list(run.candidate_differences),
    )

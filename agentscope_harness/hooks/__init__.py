"""The 25 built-in hooks, and the priority contract across the eight modules.

Within a point hooks run in ascending priority (ties by name); a refusal ends
the point's chain. The bands below are the contract: a custom hook picks its
priority by what it must see and what must not see its calls.

on_system_prompt
    50  system_prompt_append      context_shaping  rules from the config only

pre_think (before each model call)
     5  liveness_watchdog         termination      stop first: deadline, call cap, stalled;
                                                   a refusal met again: constrain, then stop
    10  tool_result_pruner        context_shaping  shrink context before routing by cost
    20  budget_router             budget           tier or fallback from money left

pre_tool_call (cheapest exact facts first, presumptions last)
     5  terminal_reached_gate     termination      a concluded run calls nothing
     8  authorization_gate        safety           who may call it
    12  sequence_gate             sequencing       prerequisite call happened
    20  phase_check               progress         required facts reached
    30  spend_gate                budget           charges ledgers: after every exact
                                                   refusal, so a refused call is never
                                                   charged (later refusals refund it)
    35  search_gate               budget           efficiency (escape latch)
    40  repeat_call_gate          repetition       efficiency; hard on repeated failure
    48  tool_breaker_gate         safety           last: a half-open probe is only
                                                   spent on a call that will run

post_tool_call (raw result first, model-facing text last)
     5  content_filter            safety           redact before anything copies text
     5  tool_breaker_record       safety           outcome and error class
    10  truncate_result           context_shaping  cap size (after redaction)
    15  content_fence             safety           fence the final body
    19  transition_notice         progress         notices go outside the fence
    20  result_nudges             budget
    30  mark_terminal             termination      verify sees the raw text
    50  drift_result_tracker      drift            new information or not

post_reflect (after each model call)
    20  drift_detector            drift            hint, then constrain (stalls, cycles)
    40  phase_step                progress
    60  terminal_enforcer         termination      last: sees every other decision

on_session_end
    10  final_answer_audit        safety           strip, redact, check claims
    90  strategy_feedback         budget           settle: report, event, callback
"""

from __future__ import annotations

from ..registry import own_hooks
from .budget import budget_router, result_nudges, search_gate, spend_gate, strategy_feedback
from .context_shaping import system_prompt_append, tool_result_pruner, truncate_result
from .drift import drift_detector, drift_result_tracker
from .progress import phase_check, phase_step, transition_notice
from .repetition import repeat_call_gate
from .safety import (
    authorization_gate,
    content_fence,
    content_filter,
    final_answer_audit,
    tool_breaker_gate,
    tool_breaker_record,
)
from .sequencing import sequence_gate
from .termination import liveness_watchdog, mark_terminal, terminal_enforcer, terminal_reached_gate

BUILTIN_HOOKS = (
    system_prompt_append,
    liveness_watchdog,
    tool_result_pruner,
    budget_router,
    terminal_reached_gate,
    authorization_gate,
    sequence_gate,
    phase_check,
    spend_gate,
    search_gate,
    repeat_call_gate,
    tool_breaker_gate,
    tool_breaker_record,
    content_filter,
    truncate_result,
    content_fence,
    transition_notice,
    result_nudges,
    mark_terminal,
    drift_result_tracker,
    drift_detector,
    phase_step,
    terminal_enforcer,
    final_answer_audit,
    strategy_feedback,
)
"""The 25 built-in hooks in DESIGN section 5's order."""

own_hooks(BUILTIN_HOOKS)

__all__ = ["BUILTIN_HOOKS"]

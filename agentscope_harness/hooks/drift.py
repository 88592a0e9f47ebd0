"""Drift: rounds that bring nothing new. The ladder climbs hint, then
constrain (``force_conclude``), then stop; never the same hint twice in a
row (a stall after progress is a new one), never a step back down.

Progress is new information, not new arguments or new noise: a result
counts when enough of it is new to the run (``Novelty``: volatile tokens
and the echo of the arguments left out), when it reaches a fact, when a
tool declares candidates or picks, or when it changes the world (a
successful ``mutation`` or ``finish``). A count read from the text
(``count_results``) is not news by itself: the same hits count again."""

from __future__ import annotations

from collections.abc import Sequence

from ..context import (
    CHARS_PER_TOKEN,
    HookContext,
    ReflectContext,
    ToolCallView,
    ToolResultContext,
    ToolResultView,
    kept_ends,
)
from ..registry import harness_hook
from ..sentinels import unfenced

_ACTING_ROLES = frozenset({"mutation", "finish"})
_STALL_HINTS = frozenset({"drift", "cycle"})
"""The drift ladder's hints: a stall after progress is a new one, hinted again."""
NOVELTY_TOKENS = 4_000
"""The most of a result (its two ends, as truncation keeps them) judged for
news: 16 KB, the default ``result_max_tokens``, about a millisecond of
shingles in one step of the event loop (64 KB held it 5 ms)."""
_PERIODS = (2, 3)


@harness_hook("post_tool_call", priority=50, name="drift_result_tracker", kind="observer")
def drift_result_tracker(ctx: ToolResultContext) -> None:
    """A successful result that brings new information makes the round a
    progress round (edge-triggered: only progress resets the stall counter).
    Every successful result the model reads is remembered, so a later repeat
    of it is not new; one a later hook withholds is not (``CallFlow.shape``
    keeps the verdict only then)."""
    result, facts = ctx.result, ctx.facts
    if not result.ok:
        facts.news_from.discard(ctx.tool.digest)
        return
    # judged on what the model reads (redacted, truncated, inside the fence):
    # the rest is not information it was given, and a 1 MB result would
    # cost its shingles on the event loop (in shadow mode, where nothing is
    # truncated, on the two ends truncation would keep); a model told to read
    # megabytes (``result_max_tokens`` raised) is judged on their two ends
    # too: whether a result is news does not take all of it (an image the
    # model had not seen is news, whatever its caption says)
    judge_news(ctx, result, ctx.tool)


def judge_news(ctx: HookContext, result: ToolResultView, tool: ToolCallView) -> None:
    """Read ``result`` as it stands for news (``result.heard``,
    ``result.news``); judged again where a hook rewrote it after this."""
    result.heard = ctx.facts.novelty.judge(
        judged_text(result.text, ctx.config.result_max_tokens), echo=tool.args, data=result.data_digests,
    )
    result.heard_of = result.text
    result.news = result.heard.news or tool.role in _ACTING_ROLES


def judged_text(text: str, result_max_tokens: int) -> str:
    """What of a result the model read is judged for news: its two ends, as
    truncation keeps them, out of their fence."""
    budget = min(result_max_tokens, NOVELTY_TOKENS)
    margin = budget * CHARS_PER_TOKEN + 512  # the ends, with their fence lines
    if len(text) > 2 * margin:  # megabytes: cut to the ends first, not copied whole to unfence
        text = text[:margin] + "\n" + text[-margin:]
    read = unfenced(text)
    ends = kept_ends(read, budget)
    return read if ends is None else "\n".join(ends)


@harness_hook("post_reflect", priority=20, name="drift_detector", kind="observer")
def drift_detector(ctx: ReflectContext) -> None:
    """``stall_rounds`` rounds without new information: hint to change
    approach; twice that: conclude (``force_conclude``, the run will end
    ``incomplete``: ``stalled``). Tools called in a repeating pattern (A, B,
    A, B or A, B, C, A, B, C) over rounds that brought nothing new climb
    faster: a hint from ``stall_rounds - 1`` such rounds (at least 2), then,
    if the pattern goes on past ``stall_rounds``, conclude (``cycling``).
    Once the run must conclude this hook says nothing more."""
    facts, stall = ctx.facts, ctx.config.stall_rounds
    facts.rounds += 1
    if facts.rounds == 1:
        return  # nothing has run yet
    if facts.new_fact_this_round:
        facts.rounds_without_progress = 0
        facts.cycle_hinted = False
        if not _STALL_HINTS.isdisjoint(facts.last_hints):
            facts.last_hints = tuple(key for key in facts.last_hints if key not in _STALL_HINTS)
    else:
        facts.rounds_without_progress += 1
    facts.new_fact_this_round = False
    if facts.force_conclude or facts.terminal is not None:
        return  # the top of the ladder: terminal_enforcer stops a model ignoring it
    idle = facts.rounds_without_progress
    cycle = repeating_pattern(facts.recent_tools) if idle >= max(2, stall - 1) else None
    if idle >= 2 * stall or (cycle is not None and facts.cycle_hinted and idle > stall):
        ctx.hint(
            f"Nothing new has come from the last {idle} rounds. Conclude now with "
            "what you have.",
            key="conclude",
        )
        facts.stuck = "cycling" if cycle is not None else "stalled"
        ctx.constrain(f"{idle} rounds without new information" + (
            f", calling {', '.join(cycle)} in a cycle" if cycle is not None else ""
        ))
    elif cycle is not None:
        facts.cycle_hinted = True
        ctx.hint(
            f"You are going round in circles: {', '.join(cycle)}, again and again, and "
            f"the last {idle} rounds brought nothing new. Try something different, or "
            "conclude with what you have.",
            key="cycle",
        )
    elif idle >= stall:
        ctx.hint(
            f"The last {idle} rounds brought nothing new. Change approach: different "
            "tool, different arguments, or conclude.",
            key="drift",
        )


def repeating_pattern(names: Sequence[str]) -> tuple[str, ...] | None:
    """The cycle of at least two distinct tools that the latest calls
    repeat, twice or more in a row (``A, B, A, B`` gives ``(A, B)``); one
    tool repeated is the loop detector's."""
    recent = list(names)
    for period in _PERIODS:
        span = 2 * period
        if len(recent) < span:
            continue
        tail = recent[-span:]
        cycle = tuple(tail[:period])
        if len(set(cycle)) > 1 and all(tail[i] == tail[i - period] for i in range(period, span)):
            return cycle
    return None

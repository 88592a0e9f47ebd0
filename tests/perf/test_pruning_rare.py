"""Pruning stays rare whatever the result size (issue 12 item 5): each
prune breaks the provider's cached prefix once, so at most one break in any
8 consecutive model calls, even when the results the pruner must keep
(``keep_last``) are alone over ``prune_over_tokens``."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

SPACING = 8


def breaks(model: ScriptedModel) -> list[int]:
    """Model calls whose messages do not extend the previous call's."""
    out = []
    for i, (prev, nxt) in enumerate(zip(model.calls, model.calls[1:]), start=2):
        if nxt["formatted"][: len(prev["formatted"])] != prev["formatted"]:
            out.append(i)
    return out


def live_tokens(call: dict) -> int:
    return sum(
        len(m["content"]) // 4 for m in call["formatted"]
        if m["role"] == "tool" and not m["content"].startswith("[pruned: ")
    )


def pruned(call: dict) -> list[bool]:
    return [m["content"].startswith("[pruned: ") for m in call["formatted"] if m["role"] == "tool"]


async def long_run(rounds: int, result_chars: int, limit: int, keep_last: int = 2):
    body = "y" * result_chars

    async def fetch(page: int) -> str:
        """Fetch a page.

        Args:
            page (int): The page.
        """
        return body

    h = Harness(
        HarnessConfig(
            prune_over_tokens=limit, keep_last=keep_last, result_max_tokens=100_000,
            loop_window=rounds + 2, loop_threshold=rounds + 2, stall_rounds=rounds + 2,
        ),
        load_entry_points=False,
    )
    model = ScriptedModel([calls(("fetch", {"page": i})) for i in range(rounds)] + [text("done")])
    agent = make_agent(model, [fetch], middlewares=h.middlewares(), max_iters=rounds + 5)
    await run(agent)
    return h, model, agent


async def test_large_results_break_the_prefix_at_most_once_per_8_rounds():
    # ~1,270-token results with prune_over_tokens=3000: the two kept results
    # alone are close to the threshold (0.1.0 broke the prefix 6 times in 10)
    h, model, agent = await long_run(40, 1270 * 4 - 60, 3000)
    assert len(model.calls) == 41
    found = breaks(model)
    assert found, "the context grows to 40 results: pruning must happen"
    assert len(found) <= 41 // SPACING
    assert all(b - a >= SPACING for a, b in pairwise(found)), found
    # every break is a prune, and each prune kept the last results whole
    prunes = [d for d in h.last_report(agent).decisions if d.hook == "tool_result_pruner"]
    assert len(prunes) == len(found)
    for i in found:
        assert pruned(model.calls[i - 1])[-2:] == [False, False]
    # pruning still bounds the context: never more than the kept tail plus
    # the rounds that may pass between two prunes
    assert max(live_tokens(c) for c in model.calls) <= (SPACING + 2) * 1300
    assert live_tokens(model.calls[-1]) < 40 * 1270 // 3


async def test_small_results_keep_to_the_limit_and_prune_to_the_low_water_mark():
    # results far below the threshold: each prune goes down to half of it,
    # so the next one is naturally many rounds away and the limit holds
    h, model, agent = await long_run(40, 100 * 4, 3000)
    found = breaks(model)
    assert 1 <= len(found) <= 41 // SPACING
    assert all(b - a >= SPACING for a, b in pairwise(found)), found
    one = max(
        len(m["content"]) // 4 for c in model.calls for m in c["formatted"] if m["role"] == "tool"
    )
    for i in found:
        assert live_tokens(model.calls[i - 1]) <= 1500
    assert max(live_tokens(c) for c in model.calls) <= 3000 + one


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tokens=st.integers(min_value=40, max_value=4000),
    keep_last=st.integers(min_value=0, max_value=3),
    limit=st.sampled_from([1000, 3000]),
)
async def test_any_result_size_breaks_at_most_once_per_8_rounds(tokens, keep_last, limit):
    rounds = 24
    h, model, agent = await long_run(rounds, tokens * 4, limit, keep_last=keep_last)
    assert len(model.calls) == rounds + 1
    found = breaks(model)
    assert all(b - a >= SPACING for a, b in pairwise(found)), found
    s = max(
        len(m["content"]) // 4 for c in model.calls for m in c["formatted"] if m["role"] == "tool"
    )
    target = limit // 2
    for i in found:
        flags = pruned(model.calls[i - 1])
        assert flags[len(flags) - keep_last:] == [False] * keep_last
    # the context stays bounded: the kept tail, or the low-water mark, plus
    # the rounds between two prunes (or the wait for a big enough step)
    bound = max(limit, keep_last * s + limit - target, max(target, keep_last * s) + SPACING * s) + s
    assert max(live_tokens(c) for c in model.calls) <= bound
    if rounds * s > bound:
        assert found, "over the bound without pruning"


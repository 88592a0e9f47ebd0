"""Tokens and prefix cache on a retrieval-heavy run.

25 rounds: the model searches 23 times (each result about 3,000 tokens),
calls the finishing tool, then answers. Bare and harnessed agents play the
same script; the harness caps each result (``result_max_tokens``) and prunes
old results (``prune_over_tokens``, ``keep_last``).

Input tokens are counted from what the model is sent (the formatted
messages plus the tool schemas, ``len(json) / 4``): the scripted model's own
usage figures are fixed and say nothing. A *prefix break* is a call whose
messages do not start with the previous call's messages, byte for byte. The
cache estimate assumes a provider prefix cache: the tokens of the longest
common prefix with the previous payload are read from cache.
"""

from __future__ import annotations

from typing import Any

from ._common import PayloadStats, Tools, full_policy, harness, make_agent, payload_stats, reply
from ._model import BenchModel, call, say
from ._report import Figure, Section

GOAL_RATIO = 0.35
ANSWER = "The Acme K2 kettle is the best match."
SIZES = {
    "full": {"rounds": 25, "result_tokens": 3000, "result_max_tokens": 1000,
                 "prune_over_tokens": 16000, "keep_last": 2},
    "quick": {"rounds": 6, "result_tokens": 600, "result_max_tokens": 200,
                  "prune_over_tokens": 800, "keep_last": 1},
}
CACHED_PRICE = 0.1
"""Price of a cached input token relative to an uncached one (typical of
provider prompt caches), for the effective-tokens figure."""


def retrieval_script(rounds: int) -> list[Any]:
    steps: list[Any] = [call("search", q=f"electric kettle, variant {i}") for i in range(rounds - 2)]
    steps.append(call("submit_answer", answer=ANSWER))
    steps.append(say(ANSWER))
    return steps


async def one_run(h: Any, p: dict[str, Any]) -> tuple[PayloadStats, str, Any]:
    model = BenchModel(retrieval_script(p["rounds"]), keep_payloads=True)
    agent = make_agent(model, Tools(result_chars=p["result_tokens"] * 4), h)
    final = await reply(agent, h)
    report = h.last_report(agent) if h is not None else None
    return payload_stats(model), final.get_text_content() or "", report


async def run(size: str = "full") -> Section:
    p = SIZES[size]
    config = full_policy(
        result_max_tokens=p["result_max_tokens"],
        prune_over_tokens=p["prune_over_tokens"],
        keep_last=p["keep_last"],
    )
    bare, bare_answer, _ = await one_run(None, p)
    harnessed, answer, report = await one_run(harness(config), p)
    answered = answer == ANSWER and bare_answer == ANSWER
    completed = report is not None and report.terminal_state.value == "completed"
    rounds = p["rounds"]
    allowed_breaks = max(rounds // 8, 1)

    section = Section("Tokens and prefix cache")
    ratio = harnessed.input_tokens / bare.input_tokens
    section.figures += [
        Figure(
            "tokens", f"input tokens over {rounds} rounds", harnessed.input_tokens, bare.input_tokens,
            goal=f"<= {GOAL_RATIO}x",
            met=(ratio <= GOAL_RATIO and answered and completed) if size == "full" else None,
            note="final answer produced" if answered else "FINAL ANSWER MISSING",
        ),
        Figure(
            "prefix", "prefix breaks (pruning)", harnessed.breaks, bare.breaks,
            goal=f"<= {allowed_breaks} (1 per 8 rounds)", met=harnessed.breaks <= allowed_breaks,
            show_ratio=False, note=f"at calls {harnessed.break_calls}" if harnessed.break_calls else "",
        ),
        Figure("cache", "cached input tokens (est.)", harnessed.cached_tokens, bare.cached_tokens),
        Figure("cache", "uncached input tokens (est.)", harnessed.uncached_tokens, bare.uncached_tokens),
        Figure(
            "cache", f"effective input tokens (cached at {CACHED_PRICE:g}x)",
            _effective(harnessed), _effective(bare),
        ),
    ]
    section.details.append(
        f"  cached share: bare {bare.cached_share:.0%}, harnessed {harnessed.cached_share:.0%}; "
        f"tool schemas changed {harnessed.tools_changed}x; config result_max_tokens="
        f"{p['result_max_tokens']}, prune_over_tokens={p['prune_over_tokens']}, keep_last={p['keep_last']}",
    )
    section.data = {"bare": bare, "harnessed": harnessed, "answered": answered, "completed": completed}
    return section


def _effective(stats: PayloadStats) -> float:
    return round(stats.uncached_tokens + CACHED_PRICE * stats.cached_tokens)

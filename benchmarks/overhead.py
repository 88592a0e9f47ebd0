"""Overhead: the same agent, bare and harnessed with the full policy (every
hook on, nothing refused), a zero-latency scripted model and trivial tools.
Wall time per round, median of interleaved repetitions (the order of the
variants rotates every repetition, so none always runs first).

Three reference variants are measured in the same loop to show where the
time goes: ``null middlewares`` (two pass-through AgentScope middlewares on
the same hooks the harness uses: AgentScope's own cost of any middleware),
the harness without ``harness.instrument(toolkit)`` (its tool-level
error-class middleware is an extra AgentScope chain per tool call) and the
harness with every hook disabled (its own machinery, without its hooks).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

from agentscope.middleware import MiddlewareBase

import agentscope_harness

from ._common import Tools, full_policy, harness, make_agent, reply
from ._model import BenchModel, call, say
from ._report import Figure, Section

GOAL = 1.05
SIZES = {
    "full": {"rounds": 20, "reps": 40, "warmup": 4},
    "quick": {"rounds": 4, "reps": 2, "warmup": 1},
}


FLOOR_GOAL = 0.05
"""The harness's own cost per reply above two pass-through middlewares on
the same hook points (AgentScope's chain cost), as a fraction of bare."""

CALL_BUDGET = 740
"""The most Python function calls the harness's own code may make per round
of the overhead reply (full policy). Time on a shared machine varies by tens
of percent between runs, so a cost that creeps up a few calls a change goes
unseen there; this count does not vary, and ``tests/perf/test_work_per_round.py``
holds it (0.1.0's last benchmarked code made 450; each guarantee since added
some). Raise it only with a reason in the commit."""


def overhead_script(rounds: int) -> list[Any]:
    """``rounds`` model calls: tool rounds cycling search / fetch /
    lookup_order (a retrieval with a ledger, a retrieval with two ledgers
    and a prerequisite, an identity-bound lookup), then the finish tool,
    then the answer. Nothing in it is refused."""
    steps: list[Any] = []
    for i in range(max(rounds - 2, 1)):
        kind = i % 3
        if kind == 0:
            steps.append(call("search", q=f"kettle {i}"))
        elif kind == 1:
            steps.append(call("fetch", url=f"https://shop.example/p/{i}"))
        else:
            steps.append(call("lookup_order", order_id=f"o-{i}", user_id="u-1"))
    steps.append(call("submit_answer", answer="The Acme K2 kettle is the best match."))
    steps.append(say("The Acme K2 kettle is the best match."))
    return steps


class PassAgent(MiddlewareBase):
    """A pass-through on the agent hooks the harness implements."""

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        return await next_handler(**input_kwargs)

    async def on_compress_context(self, agent: Any, input_kwargs: dict, next_handler: Any) -> None:
        await next_handler(**input_kwargs)

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        return current_prompt


class PassTool(MiddlewareBase):
    """A pass-through on ``on_acting``."""

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for item in next_handler(**input_kwargs):
            yield item


Timed = Callable[[int], Awaitable[tuple[float, float]]]


def variant(h: Any = None, *, instrument: bool = True, null: bool = False) -> Timed:
    """A timed reply: (wall, cpu) seconds per round; agent built untimed."""

    async def once(rounds: int) -> tuple[float, float]:
        model = BenchModel(overhead_script(rounds))
        tools = Tools()
        if null:
            agent = make_agent(model, tools, None, extra=(PassAgent(), PassTool()))
        elif h is not None and not instrument:  # the harness's middlewares, its toolkit not instrumented
            agent = make_agent(model, tools, None, extra=tuple(h.middlewares()))
        else:
            agent = make_agent(model, tools, h)
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        await reply(agent, None if null else h)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        expected = len(overhead_script(rounds))
        # a harness with a finishing tool ends the reply with its answer:
        # the bare agent's last model call is not made (per call below)
        finished_early = h is not None and bool(h.finish_tools) and bool(h.hooks)
        if model.n_calls != expected - finished_early:
            raise AssertionError(f"expected {expected - finished_early} model calls, got {model.n_calls}")
        expected = model.n_calls
        if h is not None:
            report = h.last_report(agent)
            if report.refusals or (report.terminal_state.value != "completed" and h.hooks):
                raise AssertionError(f"the overhead run must refuse nothing: {report}")
        return wall / expected, cpu / expected

    return once


async def harness_calls_per_round(rounds: int = 30, reps: int = 3) -> float:
    """The Python function calls made in the harness's own code per round
    of the overhead reply under the full policy: a count, the same on every
    run (Python 3.12+ inlines comprehensions: fewer there). A warm-up reply
    first, so that what is made once (caches, compiled patterns) is not counted."""
    once = variant(harness(full_policy()))
    await once(rounds)
    made = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal made
        if event == "call" and frame.f_code.co_filename.startswith(_HARNESS_DIR):
            made += 1

    sys.setprofile(count)
    try:
        for _ in range(reps):
            await once(rounds)
    finally:
        sys.setprofile(None)
    return made / (rounds * reps)


_HARNESS_DIR = os.path.join(str(Path(agentscope_harness.__file__).parent), "")
"""The package's own folder, its separator included (``agentscope_harness_x`` is not it)."""


async def measure_variants(
    variants: dict[str, Timed], rounds: int, reps: int, warmup: int,
) -> dict[str, list[tuple[float, float]]]:
    """Per-round (wall, cpu) samples of each variant, interleaved."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            await variants[name](rounds)
    samples: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for i in range(reps):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            samples[name].append(await variants[name](rounds))
    return samples


async def measure(h: Any, rounds: int, reps: int, warmup: int) -> tuple[list[float], list[float]]:
    """Interleaved per-round wall times (bare, harnessed)."""
    s = await measure_variants({"bare": variant(), "harnessed": variant(h)}, rounds, reps, warmup)
    return [w for w, _ in s["bare"]], [w for w, _ in s["harnessed"]]


def _median(xs: list[tuple[float, float]], i: int) -> float:
    return statistics.median(x[i] for x in xs)


def without_hooks(h: Any) -> Any:
    """``h``'s policy with every hook disabled: what the harness's own
    machinery costs (adapters, run lifecycle, model guard, prefix observer,
    output filters, reports), apart from what its hooks decide."""
    return harness(full_policy(disabled_hooks={s.name for s in h.all_hooks}))


async def run(size: str = "full") -> Section:
    p = SIZES[size]
    h = harness(full_policy())
    samples = await measure_variants(
        {
            "bare": variant(),
            "harnessed": variant(h),
            "harnessed, no instrument()": variant(h, instrument=False),
            "machinery only (no hooks)": variant(without_hooks(h)),
            "null middlewares": variant(null=True),
        },
        p["rounds"], p["reps"], p["warmup"],
    )
    bare_w, bare_c = _median(samples["bare"], 0), _median(samples["bare"], 1)
    mh = _median(samples["harnessed"], 0)
    ratio = mh / bare_w
    section = Section("Overhead")
    section.figures.append(Figure(
        "overhead", "wall time per round (median)", mh * 1e6, bare_w * 1e6, unit="us",
        goal=f"<= {GOAL}x", met=ratio <= GOAL if size == "full" else None,
        note=f"{p['rounds']} rounds a reply, {p['reps']} interleaved repetitions; "
             f"harness cost {(mh - bare_w) * 1e6:.0f} µs a round (goal: {(GOAL - 1) * bare_w * 1e6:.0f})",
    ))
    floor = _median(samples["null middlewares"], 0)
    above = (mh - floor) / bare_w
    section.figures.append(Figure(
        "overhead", "harness cost above the floor, per round", (mh - floor) * 1e6, bare_w * 1e6,
        unit="us", goal=f"<= {FLOOR_GOAL} of bare", met=above <= FLOOR_GOAL if size == "full" else None,
        show_ratio=False,
        note=f"(harnessed - two pass-through middlewares) / bare = {above:.3f}",
    ))
    calls = await harness_calls_per_round()
    section.figures.append(Figure(
        "overhead", "Python calls in the harness's code per round", calls, None, unit="calls",
        goal=f"<= {CALL_BUDGET}", met=calls <= CALL_BUDGET, show_ratio=False,
        note="a count, the same on every run: the budget tests/perf/test_work_per_round.py holds",
    ))
    section.table_head = ["variant", "wall µs/round", "wall ratio", "CPU µs/round", "CPU ratio"]
    for name, xs in samples.items():
        w, c = _median(xs, 0), _median(xs, 1)
        section.table.append([name, f"{w * 1e6:,.0f}", f"{w / bare_w:.3f}x", f"{c * 1e6:,.0f}", f"{c / bare_c:.3f}x"])
        section.details.append(
            f"  {name:<28} wall {w * 1e6:7,.0f} µs/round ({w / bare_w:.3f}x)   "
            f"cpu {c * 1e6:7,.0f} µs/round ({c / bare_c:.3f}x)",
        )
    section.data = {"samples": samples, "ratio": ratio, "above_floor": above}
    return section

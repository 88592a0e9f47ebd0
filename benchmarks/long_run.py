"""A 500-round reply: does the harness's cost per round stay flat as the
run's history grows?

One reply of 500 model calls (the overhead benchmark's tool rounds: search,
fetch with a prerequisite, an identity-bound lookup; nothing refused), bare
and harnessed, interleaved repetitions. Two figures per window of 50 rounds
(rounds 1-50 against 451-500):

- hooks: time spent in the harness's hook chains (``HookRunner.run`` and
  ``admit`` at every point, timed around each call), per round: the work
  that must be O(new data);
- round: wall time per round (between consecutive model calls), bare and
  harnessed; the bare agent's own cost grows with the history it formats.

Garbage collection is off during the measured replies (a collection lands
in whichever round allocates); the medians over the rounds of a window and
over repetitions keep the machine's noise out.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from ._common import Tools, full_policy, harness, make_agent, reply
from ._model import BenchModel
from ._report import Figure, Section
from .overhead import overhead_script

GOAL = 1.1
SIZES = {
    "full": {"rounds": 500, "window": 50, "reps": 5},
    "quick": {"rounds": 40, "window": 10, "reps": 1},
}


class TimedModel(BenchModel):
    """Records when each model call starts."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script, max_calls=100_000)
        self.stamps: list[float] = []

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.stamps.append(time.perf_counter())
        return await super()._call_api(*args, **kwargs)


def _timed_runner(h: Any, spent: list[float], model: TimedModel) -> None:
    """Time every hook chain and admission of ``h``, by round."""
    runner = h.runner
    run, admit = type(runner).run.__get__(runner), type(runner).admit.__get__(runner)

    def at() -> int:
        return max(len(model.stamps) - 1, 0)

    async def timed_run(point: str, ctx: Any) -> Any:
        t = time.perf_counter()
        try:
            return await run(point, ctx)
        finally:
            spent[at()] += time.perf_counter() - t

    def timed_admit(ctx: Any) -> Any:
        t = time.perf_counter()
        try:
            return admit(ctx)
        finally:
            spent[at()] += time.perf_counter() - t

    runner.run, runner.admit = timed_run, timed_admit


async def one(rounds: int, harnessed: bool) -> tuple[list[float], list[float]]:
    """Per-round wall times and per-round hook time of one reply."""
    h = harness(full_policy()) if harnessed else None
    model = TimedModel(overhead_script(rounds))
    agent = make_agent(model, Tools(), h, max_iters=rounds + 5)
    spent = [0.0] * (rounds + 1)
    if h is not None:
        _timed_runner(h, spent, model)
    gc.collect()
    gc.disable()  # a collection lands in whichever round allocates: not the round's own work
    try:
        await reply(agent, h)
    finally:
        gc.enable()
    if h is not None:
        report = h.last_report(agent)
        if report.refusals or report.terminal_state.value != "completed":
            raise AssertionError(f"the long run must refuse nothing: {report.terminal_state} {report.refusals}")
    walls = [b - a for a, b in zip(model.stamps, model.stamps[1:], strict=False)]
    return walls, spent[: len(walls)]


def _window(values: list[list[float]], lo: int, hi: int, pick: Callable[[list[float]], float]) -> float:
    """Per-round figure over rounds ``lo..hi`` (0-based), median across repetitions."""
    return statistics.median(pick(v[lo:hi]) for v in values)


async def run(size: str = "full") -> Section:
    p = SIZES[size]
    rounds, w = p["rounds"], p["window"]
    bare_walls, h_walls, h_spent = [], [], []
    await one(p["window"], True)  # compiled patterns, caches
    for _ in range(p["reps"]):
        walls, _ = await one(rounds, False)
        bare_walls.append(walls)
        walls, spent = await one(rounds, True)
        h_walls.append(walls)
        h_spent.append(spent)
    alone = [await harness_alone(rounds) for _ in range(p["reps"])]
    alone_start = _window(alone, 0, w, statistics.median)
    alone_end = _window(alone, rounds - w, rounds, statistics.median)
    n = min(len(x) for x in bare_walls + h_walls)
    start, end = (0, w), (n - w, n)
    med = statistics.median
    hooks_start = _window(h_spent, *start, med)
    hooks_end = _window(h_spent, *end, med)
    wall = {
        name: (_window(v, *start, med), _window(v, *end, med))
        for name, v in (("bare", bare_walls), ("harnessed", h_walls))
    }
    growth = hooks_end / hooks_start
    section = Section(f"A {rounds}-round reply")
    alone_growth = alone_end / alone_start
    section.figures += [
        Figure("long run", f"harness alone per round, rounds 1-{w}", alone_start * 1e6, None, unit="us",
               show_ratio=False),
        Figure("long run", f"harness alone per round, rounds {rounds - w + 1}-{rounds}", alone_end * 1e6, None,
               unit="us", goal=f"<= {GOAL}x rounds 1-{w}", met=alone_growth <= GOAL if size == "full" else None,
               show_ratio=False, note=f"{alone_growth:.2f}x the start"),
        Figure("long run", f"hook time per round, rounds 1-{w}", hooks_start * 1e6, None, unit="us",
               show_ratio=False),
        Figure("long run", f"hook time per round, rounds {n - w + 1}-{n}", hooks_end * 1e6, None, unit="us",
               show_ratio=False, note=f"{growth:.2f}x the start (in a real reply: cold caches)"),
    ]
    for i, label in enumerate((f"rounds 1-{w}", f"rounds {n - w + 1}-{n}")):
        section.figures.append(Figure(
            "long run", f"wall time per round, {label}", wall["harnessed"][i] * 1e6, wall["bare"][i] * 1e6,
            unit="us", note=f"harness cost {(wall['harnessed'][i] - wall['bare'][i]) * 1e6:,.0f} µs a round",
        ))
    section.data = {
        "hooks": (hooks_start, hooks_end), "alone": (alone_start, alone_end), "wall": wall, "rounds": n,
    }
    return section


async def harness_alone(rounds: int) -> list[float]:
    """Per-round time of the harness's own work on a run ``rounds`` long,
    without AgentScope (whose formatting of a growing history evicts the
    CPU caches the hooks then run in): each round ``pre_think``, one call
    judged, admitted and shaped (the overhead script's tools and
    arguments), ``post_reflect``; the run's facts accumulate as in a reply."""
    from agentscope_harness import HookContext
    from agentscope_harness.calls import result_view
    from agentscope_harness.context import ModelOutputView, ToolCallView

    from ._common import USER

    h = harness(full_policy())
    run = h.table.open("long", "bench", None, USER, time.monotonic() + 3600, None, "enforce")
    flow, runner, services = h.flow, h.runner, h.services
    steps = [json_args(step) for step in overhead_script(rounds + 2)[:rounds]]
    times: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for i, (name, args) in enumerate(steps):
            t = time.perf_counter()
            ctx = HookContext("pre_think", run, services, None)
            await runner.run("pre_think", ctx)
            view = ToolCallView(
                id=f"c{i}", name=name, args=args, policy=h.config.tools.get(name), batch=("long", i),
            )
            verdict = await flow.judge(run, None, view)
            if not verdict.allowed or flow.admit(verdict) is not None:
                raise AssertionError(f"round {i}: {name} refused")
            assert verdict.ctx is not None
            await flow.shape(verdict.ctx, result_view(f"result {i} of {name}", "success", {}))
            post = HookContext(
                "post_reflect", run, services, None, model_output=ModelOutputView("", [(name, "{}")]),
            )
            await runner.run("post_reflect", post)
            run.take_unflushed()
            times.append(time.perf_counter() - t)
    finally:
        gc.enable()
    return times


def json_args(step: Any) -> tuple[str, dict[str, Any]]:
    """(tool name, arguments) of a scripted tool-call turn."""
    import json

    block = step.content[0]
    return block.name, json.loads(block.input)

"""Round 117 (resources over time). Red team (resources over time): the harness's own work per model round
grows with the run's history over a 500-round reply.

README, Benchmarks: "500-round reply: harness's own work per round, rounds
451–500 vs 1–50 | 180 vs 169 µs | 1.07x | ≤ 1.1x" (and, under "What the
misses are": "no single hot spot is left"). The benchmark times only the hook
chains; the harness's model-call layer (``ModelGuard.call``: the prefix
observer hashes every chunk of the whole payload, ``prefix._chunk_keys``)
does work proportional to the history on every round: measured here as the
time ``ModelGuard.call`` spends outside the model call it wraps (AgentScope's
formatting and the model are excluded), on the benchmark's own 500-round reply.
"""

from __future__ import annotations

import gc
import statistics
import time

import pytest

from agentscope_harness import prefix
from benchmarks._common import Tools, full_policy, harness, make_agent, reply
from benchmarks._model import BenchModel
from benchmarks.overhead import overhead_script

pytestmark = pytest.mark.asyncio

ROUNDS, W = 500, 50


async def one_reply() -> tuple[list[float], list[float], str]:
    h = harness(full_policy())
    model = BenchModel(overhead_script(ROUNDS), max_calls=100_000)
    agent = make_agent(model, Tools(), h, max_iters=ROUNDS + 5)
    own: list[float] = []
    observed: list[float] = []
    guard = h.model_guard
    original = type(guard).call.__get__(guard)
    real_observe = prefix.observe

    def timed_observe(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real_observe(*args, **kwargs)
        finally:
            observed.append(time.perf_counter() - t)

    async def timed_call(run, agent_, input_kwargs, next_handler):
        inner = [0.0]

        async def handler(**kw):
            t = time.perf_counter()
            try:
                return await next_handler(**kw)
            finally:
                inner[0] += time.perf_counter() - t

        t = time.perf_counter()
        try:
            return await original(run, agent_, input_kwargs, handler)
        finally:
            own.append(time.perf_counter() - t - inner[0])

    guard.call = timed_call
    import agentscope_harness.model_guard as mg
    mg.observe = timed_observe
    gc.collect()
    gc.disable()
    try:
        await reply(agent, h)
    finally:
        gc.enable()
        mg.observe = real_observe
    return own, observed, h.last_report(agent).terminal_state.value


@pytest.mark.xfail(strict=True, reason="README limit: the model-call layer's prefix observation hashes the whole "
                   "payload every round (a break anywhere in it is what it looks for): O(history) per round")
async def test_the_harness_model_call_work_per_round_stays_flat_over_500_rounds() -> None:
    await one_reply()  # warm: compiled patterns, caches
    runs = [await one_reply() for _ in range(2)]
    assert all(state == "completed" for _, _, state in runs)
    med = statistics.median

    def window(values: list[float], lo: int, hi: int) -> float:
        return med(values[lo:hi])

    n = min(len(own) for own, _, _ in runs)
    start = med(window(own, 1, W + 1) for own, _, _ in runs)
    end = med(window(own, n - W, n) for own, _, _ in runs)
    obs_start = med(window(obs, 1, W + 1) for _, obs, _ in runs)
    obs_end = med(window(obs, n - W, n) for _, obs, _ in runs)
    print(f"ModelGuard.call own work per round: rounds 2-{W + 1} {start * 1e6:.0f} µs, "
          f"rounds {n - W + 1}-{n} {end * 1e6:.0f} µs ({end / start:.2f}x); "
          f"prefix.observe {obs_start * 1e6:.0f} -> {obs_end * 1e6:.0f} µs ({obs_end / obs_start:.2f}x)")
    assert end <= 1.1 * start, (
        f"harness's own work per round grows with the history: {start * 1e6:.0f} µs at the start, "
        f"{end * 1e6:.0f} µs at the end ({end / start:.2f}x; prefix.observe {obs_start * 1e6:.0f} -> "
        f"{obs_end * 1e6:.0f} µs)"
    )

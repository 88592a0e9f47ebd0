"""Worker for the multi-process store tests (spawned children import it by
name, so it lives in a module of its own, not in a test file)."""

from __future__ import annotations

import asyncio
import multiprocessing
import time


def charge(backend: str, target: str, prefix: str, key: str, times: int, usd: float,
           barrier, out) -> None:
    """Charge ``usd`` to ``key`` ``times`` times, starting together with the
    other workers; put ``(totals seen, seconds)`` on ``out``."""
    from agentscope_harness.stores import RedisStore, SQLiteStore

    async def go() -> list[float]:
        store = SQLiteStore(target) if backend == "sqlite" else RedisStore(target, prefix=prefix)
        barrier.wait(timeout=30)
        try:
            return [await store.add_spend(key, usd) for _ in range(times)]
        finally:
            if backend == "redis":
                await store.aclose()

    started = time.monotonic()
    totals = asyncio.run(go())
    out.put((totals, time.monotonic() - started))


PROCS, TIMES, USD = 4, 50, 0.25  # 0.25 is exact in binary: the total must be exact


def run_workers(backend: str, target: str, prefix: str, key: str) -> list[tuple[list[float], float]]:
    """``PROCS`` spawned processes each charge ``TIMES`` x ``USD`` at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(PROCS), ctx.Queue()
    procs = [
        ctx.Process(target=charge,
                    args=(backend, target, prefix, key, TIMES, USD, barrier, out))
        for _ in range(PROCS)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return results

"""Fleet: what the shared stores cost (``python -m benchmarks --only fleet``).

- latency: each store operation, one at a time, p50 and p99, for
  ``MemoryStore``, ``SQLiteStore`` (a file in a temporary directory) and
  ``RedisStore`` on loopback. A model call pays ``reserve_spend`` +
  ``settle_spend``; a tool call ``breaker_allow`` (+ ``breaker_record``),
  ``rate_acquire`` and ``lease_acquire`` + ``lease_release`` if configured.
- throughput: reserve + settle pairs per second with 1, 2 and 4 processes
  hammering one principal's quota (the worst case: one hot key).
- memory: bytes per entry that ``MemoryStore`` holds (``tracemalloc``).

Redis comes from ``HARNESS_BENCH_REDIS_URL``, else ``HARNESS_TEST_REDIS_URL``,
else ``redis://127.0.0.1:6379/0``; without one the Redis rows are skipped,
saying so.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentscope_harness.stores import MemoryStore, RedisStore, SQLiteStore

from ._report import Figure, Section


@dataclass(frozen=True)
class Size:
    ops: int  # timed calls per operation and store
    seconds: float  # of hammering, per process count
    procs: tuple[int, ...]
    entries: int  # MemoryStore entries measured


SIZES = {"full": Size(2000, 3.0, (1, 2, 4), 10000), "quick": Size(30, 0.3, (1, 2), 200)}
QUOTA = 1e12  # never reached: the throughput run measures the store, not the refusals
Op = Callable[[Any, int], Awaitable[Any]]


def redis_url() -> str | None:
    """A reachable Redis, or None."""
    url = (os.environ.get("HARNESS_BENCH_REDIS_URL") or os.environ.get("HARNESS_TEST_REDIS_URL")
           or "redis://127.0.0.1:6379/0")
    try:
        import redis
    except ImportError:
        return None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return url if client.ping() else None
        finally:
            client.close()
    except Exception:
        return None


async def reserve_settle(store: Any, i: int) -> None:
    rid = await store.reserve_spend("acme/u-1", 0.001, QUOTA)
    await store.settle_spend("acme/u-1", rid, 0.001)


async def lease_pair(store: Any, i: int) -> None:
    lid = await store.lease_acquire("tool:search", 1000, 60)
    await store.lease_release("tool:search", lid)


OPS: dict[str, Op] = {
    "get_spend": lambda s, i: s.get_spend("acme/u-1"),
    "add_spend": lambda s, i: s.add_spend("acme/u-1", 0.001),
    "reserve+settle (model call)": reserve_settle,
    "breaker_allow (closed)": lambda s, i: s.breaker_allow("search", 30),
    "breaker_record (ok)": lambda s, i: s.breaker_record("search", True, 5),
    "rate_acquire": lambda s, i: s.rate_acquire(f"acme/u-{i % 64}", 10**9),
    "lease acquire+release": lease_pair,
}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latencies(store: Any, ops: int) -> dict[str, tuple[float, float]]:
    """(p50, p99) in microseconds per operation."""
    out = {}
    for name, op in OPS.items():
        for i in range(max(5, ops // 20)):  # warm up (connections, scripts, pages)
            await op(store, i)
        samples = []
        for i in range(ops):
            t0 = time.perf_counter()
            await op(store, i)
            samples.append((time.perf_counter() - t0) * 1e6)
        out[name] = (statistics.median(samples), pct(samples, 0.99))
    return out


def make_store(kind: str, target: str, prefix: str) -> Any:
    if kind == "sqlite":
        return SQLiteStore(target)
    return RedisStore(target, prefix=prefix)


def hammer(kind: str, target: str, prefix: str, seconds: float, barrier: Any, out: Any) -> None:
    """One process: reserve + settle for ``seconds``; put the pairs done."""

    async def go() -> int:
        store = make_store(kind, target, prefix)
        await reserve_settle(store, 0)
        barrier.wait(timeout=60)
        done, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            await reserve_settle(store, done)
            done += 1
        if kind == "redis":
            await store.aclose()
        return done

    out.put(asyncio.run(go()))


def throughput(kind: str, target: str, prefix: str, procs: int, seconds: float) -> float:
    """Reserve + settle pairs per second, all processes together."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=hammer, args=(kind, target, prefix, seconds, barrier, out))
               for _ in range(procs)]
    for w in workers:
        w.start()
    total = sum(out.get(timeout=120) for _ in workers)
    for w in workers:
        w.join(timeout=30)
    return total / seconds


async def memory_bytes(entries: int) -> dict[str, float]:
    """Bytes per entry ``MemoryStore`` holds, key strings included."""
    fills: dict[str, Op] = {
        "daily spend per principal": lambda s, i: s.add_spend(f"acme/u-{i:05d}", 0.25),
        "live reservation": lambda s, i: s.reserve_spend(f"acme/u-{i:05d}", 0.25, 10.0),
        "rate entry": lambda s, i: s.rate_acquire(f"acme/u-{i:05d}", 60),
        "lease": lambda s, i: s.lease_acquire(f"acme/u-{i:05d}", 3, 60),
        "failing breaker": lambda s, i: s.breaker_record(f"tool-{i:05d}", False, 5),
    }
    out = {}
    for name, fill in fills.items():
        store = MemoryStore()
        await fill(store, -1)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(entries):
            await fill(store, i)
        out[name] = (tracemalloc.get_traced_memory()[0] - before) / entries
        tracemalloc.stop()
    return out


async def cleanup(url: str, prefix: str) -> None:
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(url)
    async for key in client.scan_iter(f"{prefix}:*"):
        await client.delete(key)
    await client.aclose()


async def run(size: str = "full") -> Section:
    cfg = SIZES[size]
    section = Section("Fleet: shared stores (latency per operation, throughput, memory)")
    url = redis_url()
    prefix = f"harness-bench:{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "bench.db")
        stores: dict[str, Any] = {"memory": MemoryStore(), "sqlite": SQLiteStore(db)}
        if url:
            stores["redis"] = RedisStore(url, prefix=prefix)
        else:
            section.details.append("  Redis rows skipped: no Redis reachable (set HARNESS_BENCH_REDIS_URL)")
        measured = {name: await latencies(store, cfg.ops) for name, store in stores.items()}
        section.table_head = ["operation"] + [f"{n} p50 / p99 (µs)" for n in stores]
        for op in OPS:
            section.table.append([op] + [f"{measured[n][op][0]:,.0f} / {measured[n][op][1]:,.0f}"
                                         for n in stores])
        for name in stores:
            p50, p99 = measured[name]["reserve+settle (model call)"]
            section.figures.append(Figure(
                "fleet", f"{name}: reserve+settle per model call, p50", p50, None, unit="us",
                show_ratio=False, note=f"p99 {p99:,.0f} µs"))
        targets = {"sqlite": db} | ({"redis": url} if url else {})
        rates: dict[str, dict[int, float]] = {}
        for kind, target in targets.items():
            rates[kind] = {n: throughput(kind, target, prefix, n, cfg.seconds)
                           for n in cfg.procs}
            section.figures.append(Figure(
                "fleet", f"{kind}: reserve+settle per second, {max(cfg.procs)} processes",
                rates[kind][max(cfg.procs)], None, show_ratio=False,
                note=", ".join(f"{n} proc: {r:,.0f}/s" for n, r in rates[kind].items())))
        for store in stores.values():
            if isinstance(store, RedisStore):
                await store.aclose()
    if url:
        await cleanup(url, prefix)
    memory = await memory_bytes(cfg.entries)
    section.details.append("  " + " | ".join(section.table_head))
    section.details += ["  " + " | ".join(row) for row in section.table]
    section.details.append("  reserve+settle throughput, one hot principal: " + "; ".join(
        f"{kind} " + ", ".join(f"{n} proc {r:,.0f}/s" for n, r in by.items())
        for kind, by in rates.items()))
    section.details.append("  MemoryStore bytes per entry: " + ", ".join(
        f"{name} {b:,.0f}" for name, b in memory.items()))
    section.data = {"latency": measured, "throughput": rates, "memory": memory, "redis": bool(url)}
    return section

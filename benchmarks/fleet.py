"""Fleet: what the shared stores cost (``python -m benchmarks --only fleet``).

- latency: each store operation, one at a time, p50 and p99, for
  ``MemoryStore``, ``SQLiteStore`` (a file in a temporary directory) and
  ``RedisStore`` on loopback. A model call pays ``reserve_spend`` +
  ``settle_spend``; a tool call ``breaker_allow`` (+ ``breaker_record``),
  ``rate_acquire`` and ``lease_acquire`` + ``lease_release`` if configured.
- throughput: reserve + settle pairs per second with 1, 2 and 4 processes
  hammering one principal's quota (the worst case: one hot key).
- memory: bytes per entry that ``MemoryStore`` holds (``tracemalloc``).
- harness: whole runs of a real Agent (scripted model) under a Harness that
  uses every shared feature (daily quota with reservations, a tool rate
  limit, a tool concurrency limit, runs in flight per principal, shared
  breakers): run latency p50/p99 with MemoryStore and RedisStore, the
  latency Redis adds per model call and per tool call (a one-call run, and
  a run with one tool call more: differences of medians), and runs per
  second with 1, 2 and 4 processes on one Redis.

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
    return _per_second(hammer, (kind, target, prefix, seconds), procs, seconds, wait_s=120)


def _per_second(worker: Any, args: tuple[Any, ...], procs: int, seconds: float, wait_s: float) -> float:
    """``procs`` spawned processes run ``worker(*args, barrier, out)`` at
    once (a barrier starts them together); their counts, per second."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=worker, args=(*args, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    total = sum(out.get(timeout=wait_s) for _ in workers)
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


HARNESS_RUNS = {"full": 400, "quick": 20}


def fleet_harness(store: Any) -> Any:
    """A Harness using every feature shared through ``store``."""
    from agentscope_harness import ConcurrencyLimit, CostPolicy, Harness, HarnessConfig, RateLimit

    return Harness(HarnessConfig(
        store=store,
        cost=CostPolicy(prices={"scripted": (2.0, 8.0)}, daily_quota_usd=1e9, max_output_tokens=100),
        rate_limits=[RateLimit(scope="tool", tool="search", calls_per_min=10**8),
                     RateLimit(scope="principal", calls_per_min=10**8)],
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="search", max_in_flight=10**6),
                            ConcurrencyLimit(scope="principal", max_in_flight=10**6)],
    ), load_entry_points=False)


async def one_run(harness: Any, with_tool: bool, i: int) -> float:
    """Seconds of one reply: one model call, or a tool call and two."""
    from agentscope.agent import Agent, InjectionConfig
    from agentscope.message import UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_harness import Principal
    from agentscope_harness.testing import ScriptedModel, calls, text

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        return f"found {q}"

    script = ([calls(("search", {"q": f"q{i}"}))] if with_tool else []) + [text("ok")]
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")
    agent = Agent(name="shop", system_prompt="You are a shop assistant.", model=ScriptedModel(script),
                  toolkit=Toolkit(tools=[FunctionTool(search, permission=allow)]),
                  middlewares=harness.middlewares(), injection_config=InjectionConfig(enabled=False))
    t0 = time.perf_counter()
    with harness.acting_for(Principal(user_id=f"u-{i % 16}", tenant="acme")):
        async for _ in agent.reply_stream(UserMsg("user", "go")):
            pass
    return time.perf_counter() - t0


async def run_latencies(store: Any, runs: int) -> dict[str, tuple[float, float]]:
    """(p50, p99) ms of a one-model-call run and of a tool-call run."""
    harness = fleet_harness(store)
    out = {}
    for with_tool in (False, True):
        for i in range(max(3, runs // 20)):
            await one_run(harness, with_tool, i)
        samples = [await one_run(harness, with_tool, i) * 1e3 for i in range(runs)]
        out["tool" if with_tool else "model"] = (statistics.median(samples), pct(samples, 0.99))
    return out


def run_hammer(target: str, prefix: str, seconds: float, barrier: Any, out: Any) -> None:
    """One process: harnessed tool-call runs, 8 side by side, for ``seconds``."""

    async def go() -> int:
        store = RedisStore(target, prefix=prefix)
        harness = fleet_harness(store)
        await one_run(harness, True, 0)
        barrier.wait(timeout=60)
        end, done = time.perf_counter() + seconds, 0

        async def lane(k: int) -> int:
            n = 0
            while time.perf_counter() < end:
                await one_run(harness, True, k * 100_000 + n)
                n += 1
            return n

        done = sum(await asyncio.gather(*(lane(k) for k in range(8))))
        await store.aclose()
        return done

    out.put(asyncio.run(go()))


def run_throughput(target: str, prefix: str, procs: int, seconds: float) -> float:
    """Harnessed runs per second, all processes on one Redis together."""
    return _per_second(run_hammer, (target, prefix, seconds), procs, seconds, wait_s=180)


async def harness_rows(section: Section, size: str, url: str | None, prefix: str) -> dict[str, Any]:
    """What the harness adds per call with each store, and runs/s on Redis."""
    runs, cfg = HARNESS_RUNS[size], SIZES[size]
    stores: dict[str, Any] = {"memory": MemoryStore()}
    if url:
        stores["redis"] = RedisStore(url, prefix=f"{prefix}:h")
    lat = {name: await run_latencies(store, runs) for name, store in stores.items()}
    for name, by in lat.items():
        section.details.append(
            f"  harnessed run, {name}: one model call p50 {by['model'][0]:.2f} ms / p99 "
            f"{by['model'][1]:.2f} ms; one tool call + two model calls p50 {by['tool'][0]:.2f} ms "
            f"/ p99 {by['tool'][1]:.2f} ms")
    data: dict[str, Any] = {"latency_ms": lat}
    if "redis" in lat:
        per_model = lat["redis"]["model"][0] - lat["memory"]["model"][0]
        per_tool = (lat["redis"]["tool"][0] - lat["memory"]["tool"][0]) - per_model
        section.figures.append(Figure("fleet", "Redis vs memory: added per model call, p50",
                                      per_model * 1e3, None, unit="us", show_ratio=False))
        section.figures.append(Figure("fleet", "Redis vs memory: added per tool call, p50",
                                      per_tool * 1e3, None, unit="us", show_ratio=False))
        rates = {n: run_throughput(url, f"{prefix}:t", n, cfg.seconds) for n in cfg.procs}
        section.figures.append(Figure(
            "fleet", f"redis: harnessed runs per second, {max(cfg.procs)} processes",
            rates[max(cfg.procs)], None, show_ratio=False,
            note=", ".join(f"{n} proc: {r:,.0f}/s" for n, r in rates.items())))
        section.details.append("  harnessed tool-call runs per second on one Redis: " + ", ".join(
            f"{n} proc {r:,.0f}/s" for n, r in rates.items()))
        data |= {"added_per_model_call_us": per_model * 1e3, "added_per_tool_call_us": per_tool * 1e3,
                 "runs_per_s": rates}
        await stores["redis"].aclose()
    return data


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
    harness = await harness_rows(section, size, url, prefix)
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
    section.data = {"latency": measured, "throughput": rates, "memory": memory, "redis": bool(url),
                    "harness": harness}
    return section

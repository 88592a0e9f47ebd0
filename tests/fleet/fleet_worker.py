"""Worker processes of the fleet tests. Spawned children import this module
by name, so it lives apart from the test files. Each worker stays up for a
whole test module and runs one scenario per command, starting it together
with the other workers on a shared barrier."""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import Any

PROCS, OPS = 4, 50


def make_store(backend: str, target: str, prefix: str) -> Any:
    from agentscope_harness.stores import RedisStore, SQLiteStore

    if backend == "sqlite":
        return SQLiteStore(target, timeout_s=10.0)
    return RedisStore(target, prefix=prefix, timeout_s=10.0)


async def scenario(store: Any, name: str, key: str, in_flight: Any) -> list[Any]:
    """Run ``OPS`` operations of ``name``; the worker's own log of outcomes."""
    log: list[Any] = []
    for _ in range(OPS):
        if name == "lease_hold":  # never released: exactly max_in_flight in all
            log.append(await store.lease_acquire(key, 3, lease_s=60))
        elif name == "lease_churn":  # acquire, count in flight, release
            lid = await store.lease_acquire(key, 3, lease_s=60)
            if lid is None:
                log.append(None)
                continue
            with in_flight.get_lock():
                in_flight.value += 1
                log.append(in_flight.value)
            await asyncio.sleep(0.001)
            with in_flight.get_lock():
                in_flight.value -= 1
            await store.lease_release(key, lid)
        elif name == "rate":
            log.append(await store.rate_acquire(key, per_min=5))
        elif name == "tokens":
            log.append(await store.rate_acquire(key, per_min=1000, cost=30))
        elif name == "reserve":
            rid = await store.reserve_spend(key, 0.25, quota=10.0)
            log.append(None if rid is None else await store.settle_spend(key, rid, 0.25))
        elif name == "reserve_under":  # settle below the hold: the freed rest is reused
            rid = await store.reserve_spend(key, 0.5, quota=10.0)
            log.append(None if rid is None else await store.settle_spend(key, rid, 0.25))
        elif name == "allow":
            log.append(await store.breaker_allow(key, cooldown_s=0, probe_lease_s=60))
        else:
            raise ValueError(name)
    return log


def serve(commands: Any, out: Any, barrier: Any, in_flight: Any) -> None:
    """Run commands ``(backend, target, prefix, scenario, key)`` until None."""

    async def one(command: tuple[str, str, str, str, str]) -> list[Any]:
        backend, target, prefix, name, key = command
        store = make_store(backend, target, prefix)
        barrier.wait(timeout=30)
        try:
            return await scenario(store, name, key, in_flight)
        finally:
            if backend == "redis":
                await store.aclose()

    while (command := commands.get()) is not None:
        try:
            out.put(("ok", asyncio.run(one(command))))
        except Exception as exc:
            out.put(("error", repr(exc)))


class Fleet:
    """``PROCS`` spawned worker processes."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier, self.out = ctx.Barrier(PROCS), ctx.Queue()
        self.in_flight = ctx.Value("i", 0)
        self.queues = [ctx.Queue() for _ in range(PROCS)]
        self.procs = [ctx.Process(target=serve, args=(q, self.out, self.barrier, self.in_flight),
                                  daemon=True) for q in self.queues]
        for p in self.procs:
            p.start()

    def run(self, backend: str, target: str, prefix: str, name: str, key: str) -> list[list[Any]]:
        """Every worker's log of one scenario run by all at once."""
        for q in self.queues:
            q.put((backend, target, prefix, name, key))
        results = [self.out.get(timeout=60) for _ in self.queues]
        errors = [detail for status, detail in results if status == "error"]
        assert not errors, errors
        return [log for _, log in results]

    def close(self) -> None:
        for q in self.queues:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10)

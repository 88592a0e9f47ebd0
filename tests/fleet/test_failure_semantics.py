"""Failure semantics: every store call is bounded by the store's timeout and
the caller's deadline, an unresponsive or restarted Redis is DependencyDown
and the same store object recovers, SQLite never blocks the event loop, and
no Redis key lives forever."""

from __future__ import annotations

import asyncio
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest
from fleetkit import PrivateRedis

from agentscope_harness import DependencyDown
from agentscope_harness.stores import RedisStore, SQLiteStore, bounded

HANG_GUARD_S = 20.0  # a hang fails the test instead of stalling the suite


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A server on 127.0.0.1 that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def all_calls(store: RedisStore | SQLiteStore, deadline: float | None = None) -> list:
    """One of every store call, each a fresh coroutine."""
    return [
        store.get_spend("k", deadline=deadline),
        store.add_spend("k", 1.0, deadline=deadline),
        store.reserve_spend("k", 1.0, 5.0, deadline=deadline),
        store.settle_spend("k", "2020-01-01/x", 1.0, deadline=deadline),
        store.breaker_allow("t", 1.0, deadline=deadline),
        store.breaker_record("t", False, 3, deadline=deadline),
        store.rate_acquire("k", 10, deadline=deadline),
        store.lease_acquire("k", 3, 60.0, deadline=deadline),
        store.lease_release("k", "x", deadline=deadline),
    ]


async def test_an_unresponsive_redis_is_dependency_down_within_the_store_timeout(black_hole):
    store = RedisStore(black_hole, timeout_s=0.2)
    for call in all_calls(store):
        with pytest.raises(DependencyDown) as info:
            await asyncio.wait_for(call, HANG_GUARD_S)
        assert "Redis store" in str(info.value)
    await store.aclose()


async def test_the_callers_deadline_bounds_a_call_shorter_than_the_store_timeout(black_hole):
    store = RedisStore(black_hole, timeout_s=60.0)
    deadline = time.monotonic() + 0.3
    with pytest.raises(DependencyDown) as info:
        await asyncio.wait_for(store.get_spend("k", deadline=deadline), HANG_GUARD_S)
    # the time left when the call starts (a little under 0.3 s), never the store's 60 s
    waited = re.search(r"no answer within ([0-9.]+) s", str(info.value))
    assert waited is not None and 0.2 < float(waited.group(1)) <= 0.3
    await store.aclose()


async def test_a_deadline_already_past_fails_at_once_without_calling(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.db"))
    for call in all_calls(store, deadline=time.monotonic() - 1):
        with pytest.raises(DependencyDown, match="no time left before the deadline"):
            await call
    assert await store.get_spend("k") == 0.0  # nothing was charged


async def test_bounded_passes_results_and_errors_through():
    async def value() -> int:
        return 7

    async def boom() -> int:
        raise KeyError("x")

    assert await bounded(value(), "dep", 1.0, time.monotonic() + 5) == 7
    assert await bounded(value(), "dep", None) == 7
    with pytest.raises(KeyError):
        await bounded(boom(), "dep", 1.0)


async def test_a_restarted_redis_fails_closed_then_the_same_store_recovers(
        private_redis: PrivateRedis):
    store = RedisStore(private_redis.url, prefix="restart", timeout_s=0.5)
    assert await store.add_spend("acme/u-42", 1.0) == 1.0
    assert await store.lease_acquire("run:acme", 2, 60) is not None

    private_redis.stop()
    for call in all_calls(store):
        with pytest.raises(DependencyDown):
            await asyncio.wait_for(call, HANG_GUARD_S)

    private_redis.start()  # an empty server: no persistence in this test
    assert await store.add_spend("acme/u-42", 0.5) == 0.5
    assert await store.reserve_spend("acme/u-42", 1.0, quota=1.25) is None
    assert await store.reserve_spend("acme/u-42", 0.75, quota=1.25) is not None
    assert await store.breaker_record("search", False, failures_to_open=1) == "open"
    assert await store.breaker_allow("search", cooldown_s=0) == "probe"  # scripts re-loaded
    assert await store.rate_acquire("k", 10) == 0.0
    assert await store.lease_acquire("run:acme", 2, 60) is not None
    await store.aclose()


async def test_every_redis_key_has_a_ttl(redis_url, prefix):
    import redis.asyncio as aredis

    store = RedisStore(redis_url, prefix=prefix)
    await store.add_spend("a", 1.0)
    rid = await store.reserve_spend("a", 1.0, quota=5.0)
    await store.reserve_spend("a", 1.0, quota=5.0)
    assert rid is not None
    await store.settle_spend("a", rid, 0.5)
    await store.breaker_record("t1", False, failures_to_open=5)  # closed, one failure
    await store.breaker_record("t2", False, failures_to_open=1)  # open
    await store.breaker_allow("t2", cooldown_s=0)  # half-open
    await store.rate_acquire("a", 10, cost=3)
    await store.lease_acquire("a", 3, 30)
    client = aredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        kinds = {k.decode().split(":")[2] for k in keys}
        assert kinds == {"spend", "holds", "settled", "breaker", "rate", "lease"}
        for key in keys:
            assert await client.ttl(key) > 0, key
    finally:
        await client.aclose()
    await store.aclose()


async def test_more_concurrent_calls_than_connections_wait_their_turn(redis_url, prefix):
    """300 runs checking their budget at once on a pool of 50 connections:
    every call answers (redis-py's own pool refused the 101st at once, and a
    busy server failed closed with ``dependency_down``)."""
    store = RedisStore(redis_url, prefix=prefix)
    try:
        results = await asyncio.gather(*(store.add_spend(f"p{i % 7}", 0.01) for i in range(300)),
                                       return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert sum(await asyncio.gather(*(store.get_spend(f"p{i}") for i in range(7)))) == pytest.approx(3.0)
    finally:
        await store.aclose()


async def test_sqlite_waits_off_the_loop_and_a_locked_file_is_dependency_down(tmp_path):
    path = str(tmp_path / "s.db")
    store = SQLiteStore(path, timeout_s=0.3)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(DependencyDown):
            await asyncio.wait_for(store.add_spend("k", 1.0), HANG_GUARD_S)
        # the timed-out call's thread waits for the lock up to timeout_s from its own
        # start: freed before that, the lock would let that write land after all
        # (the store says so); the lock is held past it, so this one never lands
        await asyncio.sleep(store.timeout_s * 3)
    finally:
        task.cancel()
        locker.execute("ROLLBACK")
        locker.close()
    assert ticks > 0  # the loop kept running while the store waited
    assert await store.add_spend("k", 1.0) == 1.0  # and the store works once the lock is free

"""An acquisition whose caller stops waiting is given back.

A lease or a reservation is taken once its request reaches the store: a
SQLite write finishes in its thread, a Redis script runs on the server,
whether or not the caller still waits. A caller cancelled (a reply the
user abandoned) or out of time (the store's bound) while it waits must not
leave the slot taken until its TTL: the user's next reply would be refused
``concurrency_limited`` for ``lease_s``. Real stores: a SQLite file whose
write lock another connection holds, a private redis-server behind a proxy
that holds its replies back.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fleetkit import PrivateRedis
from netkit import ReplyProxy

from agentscope_harness import DependencyDown
from agentscope_harness.stores import RedisStore, SQLiteStore

KEY = "principal:u1"


async def _abandoned(acquire: Awaitable[Any], how: str) -> None:
    """Stop waiting for ``acquire``: cancel it (``cancel``) or let the
    store's own bound expire (``timeout``)."""
    task = asyncio.ensure_future(acquire)
    if how == "cancel":
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(DependencyDown):
            await task


async def _eventually(check: Callable[[], Any]) -> None:
    for _ in range(100):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("what the abandoned call took was never given back")


@pytest.mark.parametrize("what", ["lease", "reservation"])
async def test_sqlite_gives_back_what_an_abandoned_call_took(tmp_path: Any, what: str) -> None:
    """Cancelled while its thread waits for the write lock (a store's own
    bound is also the connection's busy timeout: that thread gives up)."""
    path = str(tmp_path / "f.db")
    store = SQLiteStore(path)
    await store.lease_release(KEY, "none")  # the tables exist
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")
    call = (store.lease_acquire(KEY, 1, 300) if what == "lease"
            else store.reserve_spend(KEY, 1.0, 1.0, ttl_s=300))
    waiting = asyncio.ensure_future(_abandoned(call, "cancel"))
    await asyncio.sleep(0.4)  # past the cancel and the bound: the thread still waits for the lock
    other_process.execute("COMMIT")
    other_process.close()
    await waiting
    await asyncio.sleep(0.3)  # the thread has the lock now: its write is done
    table = "harness_leases" if what == "lease" else "harness_holds"

    async def freed() -> bool:
        with sqlite3.connect(path) as conn:
            return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0

    await _eventually(freed)
    # and the slot (the whole quota) is the next caller's
    taken = await (store.lease_acquire(KEY, 1, 300) if what == "lease" else store.reserve_spend(KEY, 1.0, 1.0))
    assert taken is not None


@pytest.mark.parametrize("how", ["cancel", "timeout"])
@pytest.mark.parametrize("what", ["lease", "reservation"])
async def test_redis_gives_back_what_an_abandoned_call_took(private_redis: PrivateRedis, how: str,
                                                            what: str) -> None:
    import redis.asyncio as redis_asyncio

    proxy = ReplyProxy(private_redis.port)
    port = await proxy.start()
    store = RedisStore(f"redis://127.0.0.1:{port}/0", prefix="t", timeout_s=0.3 if how == "timeout" else 5.0)
    admin = redis_asyncio.Redis.from_url(private_redis.url)
    try:
        # connected, and the script loaded (a first EVALSHA answers NOSCRIPT, running nothing)
        if what == "lease":
            await store.lease_release("warm", str(await store.lease_acquire("warm", 1, 300)))
        else:
            await store.settle_spend("warm", str(await store.reserve_spend("warm", 1.0, 1.0)), 0.0)
        proxy.delay_s = 0.6
        call = (store.lease_acquire(KEY, 1, 300) if what == "lease"
                else store.reserve_spend(KEY, 1.0, 1.0, ttl_s=300))
        await _abandoned(call, how)
        proxy.delay_s = 0.0

        async def freed() -> bool:
            kind, size = (b":lease:", admin.zcard) if what == "lease" else (b":holds:", admin.hlen)
            return all([await size(k) == 0 async for k in admin.scan_iter(f"t:*{KEY}") if kind in k])

        await asyncio.sleep(0.7)  # the delayed reply has arrived (or its connection was dropped)
        await _eventually(freed)
        taken = await (store.lease_acquire(KEY, 1, 300) if what == "lease"
                       else store.reserve_spend(KEY, 1.0, 1.0))
        assert taken is not None
    finally:
        await store.aclose()
        await admin.aclose()
        await proxy.close()

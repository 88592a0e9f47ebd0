"""Red-team tests: ``tests/hooks`` helpers importable, and two workers'
handles on one shared store."""

import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentscope_harness.stores import MemoryStore, RedisStore, SQLiteStore

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "hooks"))

from scripted import redis_url


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def two_workers(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    """Two handles on one shared store, as two workers hold them: one
    ``MemoryStore`` object, two ``SQLiteStore``s on one file, two
    ``RedisStore``s on one Redis (their keys deleted after)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
    elif request.param == "sqlite":
        path = str(tmp_path / "fleet.db")
        yield SQLiteStore(path), SQLiteStore(path)
    else:
        import redis

        url = redis_url()
        prefix = f"rt:{uuid.uuid4().hex[:8]}"
        a, b = RedisStore(url, prefix=prefix), RedisStore(url, prefix=prefix)
        try:
            yield a, b
        finally:
            await a.aclose()
            await b.aclose()
            client = redis.Redis.from_url(url)
            for key in client.scan_iter(f"{prefix}:*"):
                client.delete(key)
            client.close()


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix of this test's own on the red-team Redis (the test is
    skipped, saying why, without one); its keys are deleted after."""
    import redis.asyncio as redis_asyncio

    url = redis_url()
    prefix = f"rt{uuid.uuid4().hex[:8]}"
    try:
        yield prefix
    finally:
        admin = redis_asyncio.Redis.from_url(url)
        async for key in admin.scan_iter(f"{prefix}:*"):
            await admin.delete(key)
        await admin.aclose()


@pytest.fixture
def redis_reachable() -> str:
    """The red-team Redis (``scripted.REDIS_URL``); the test is skipped, saying why, without one."""
    return redis_url()

"""Fixtures of the fleet tests: the shared Redis (``HARNESS_TEST_REDIS_URL``),
a private redis-server a test may stop and restart, and each store fresh."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from fleetkit import PrivateRedis, ping

from agentscope_harness.stores import LedgerStore, MemoryStore, RedisStore, SQLiteStore


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis ``.ci/run`` starts; skip, saying why, without one."""
    pytest.importorskip("redis", reason="fleet tests need the redis package")
    url = os.environ.get("HARNESS_TEST_REDIS_URL")
    if not url:
        pytest.skip("HARNESS_TEST_REDIS_URL is not set (.ci/run exports it): Redis fleet tests skipped")
    if not ping(url):
        pytest.skip(f"no Redis answers at HARNESS_TEST_REDIS_URL={url}: Redis fleet tests skipped")
    return url


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test only; its keys are deleted afterwards."""
    import redis

    name = f"harness-fleet:{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{name}:*"):
        client.delete(key)
    client.close()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    pytest.importorskip("redis", reason="fleet tests need the redis package")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server binary: the restart test needs one of its own")
    server = PrivateRedis(binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[LedgerStore]:
    """Each store, fresh, for the semantics every store must share."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        yield SQLiteStore(str(tmp_path / "fleet.db"))
    else:
        url = request.getfixturevalue("redis_url")
        redis_store = RedisStore(url, prefix=request.getfixturevalue("prefix"))
        yield redis_store
        await redis_store.aclose()

"""Round 171 c (an ops team's scenarios on "Running many workers"; 30 of 34 held): store
settings that cannot work were accepted, and every run then ended ``dependency_down``
("a service it needs is unavailable") while Redis answered fine, or the fleet shared db 0."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentscope_harness import ConcurrencyLimit, RedisStore
from agentscope_harness.config import LONGEST_LEASE_S
from agentscope_harness.stores import LedgerStore


@pytest.mark.parametrize("prefix", [None, 5, b"harness"])
def test_a_prefix_that_is_no_text_is_refused_naming_it(prefix: object):
    """An unset env var read as None built every key with a TypeError inside the store."""
    pytest.importorskip("redis")
    with pytest.raises(ValueError, match="prefix must be text"):
        RedisStore("redis://127.0.0.1:6399/8", prefix=prefix)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399/harness", "redis://127.0.0.1:6399/1x",
                                 "rediss://127.0.0.1:6399/²"])
def test_a_database_that_is_no_number_is_refused_naming_url(url: str):
    """redis-py reads a database it cannot number as none: db 0, shared with whatever lives there."""
    pytest.importorskip("redis")
    with pytest.raises(ValueError, match="^url must be .*database .* whole number"):
        RedisStore(url)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399", "redis://127.0.0.1:6399/", "redis://127.0.0.1:6399/12",
                                 "unix:///tmp/redis.sock?db=3"])
def test_a_numbered_or_no_database_is_read(url: str):
    pytest.importorskip("redis")
    RedisStore(url)


def test_a_lease_longer_than_a_year_is_refused_naming_lease_s():
    """lease_s=1e16 passed the finite check; Redis's lease script failed each acquire."""
    with pytest.raises(ValidationError, match="lease_s"):
        ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=1e16)
    assert ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=LONGEST_LEASE_S).lease_s == LONGEST_LEASE_S


async def test_every_store_holds_the_longest_lease(store: LedgerStore):
    """The bound is one every store keeps: a year's lease is taken, counted and renewed."""
    lease = await store.lease_acquire("acme/alice", 1, LONGEST_LEASE_S)
    assert lease is not None
    assert await store.lease_acquire("acme/alice", 1, LONGEST_LEASE_S) is None
    assert await store.lease_renew("acme/alice", lease, LONGEST_LEASE_S)
    await store.lease_release("acme/alice", lease)
    assert await store.lease_acquire("acme/alice", 1, LONGEST_LEASE_S) is not None

"""Round 128 c: a worker whose host clock is stepped (NTP) after
``RedisStore`` read the server's clock offset spends a day of its own.

README, "Running many workers": "the daily spend and its per-call
reservations (`RedisStore` keeps them under the UTC day of the server's
clock, `TIME`, its offset to the worker's read once a minute: a worker whose
clock is off spends the fleet's day, never one of its own)"; "Concurrent runs
never spend past the quota as long as a call costs no more than its
estimate."

Attack: worker B boots with its host clock 3 days behind (a VM restored from
a snapshot, NTP not yet synced). Its first store call (Bob's request) reads
the offset (+3 days). Seconds later NTP steps the host clock right (the
offset is now 3 days too much, and is kept for `CLOCK_READ_S` = 60 s, since
it is timed on the monotonic clock but applied to the wall clock). Alice,
whose $2 quota worker A has spent, reaches worker B within that minute.

What happened: B computes `_wall() + offset` = server time + 3 days: it
reserves and charges against a day nobody spent on, and admits a second
full quota for Alice. Should: the server's time advanced by the monotonic
clock since it was read (``TIME`` at read + (monotonic() - read_at)), which
a wall-clock step cannot move."""

from __future__ import annotations

import time
import uuid

import pytest
from agentscope.message import UserMsg

import agentscope_harness.stores.redis as redis_store
from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice
from agentscope_harness.stores import RedisStore
from tests.scripted import ALICE, BOB, ScriptedModel, calls, drain, make_agent, redis_url, text

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _needs_redis() -> None:
    redis_url()  # skipped, saying why, where no Redis answers
URL = "redis://127.0.0.1:6399/1"  # tests.scripted.REDIS_URL
PRICES = {"scripted": ModelPrice(100.0, 100.0)}
QUOTA = 2.0


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    return f"found {q}"


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(store=RedisStore(URL, prefix=prefix),
                                 cost=CostPolicy(daily_quota_usd=QUOTA, prices=PRICES)),
                   load_entry_points=False, environ={})


def _model() -> ScriptedModel:
    return ScriptedModel([*[calls(("lookup", {"q": str(i)}), inp=1000, out=3000) for i in range(20)], text("done")])


async def test_a_clock_stepped_after_the_offset_read_does_not_open_a_second_quota(
        monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = f"rt128c{uuid.uuid4().hex[:8]}"
    try:
        await _attack(prefix, monkeypatch)
    finally:
        import redis.asyncio as redis_asyncio

        admin = redis_asyncio.Redis.from_url(URL)
        async for key in admin.scan_iter(f"{prefix}:*"):
            await admin.delete(key)
        await admin.aclose()


async def _attack(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _worker(prefix), _worker(prefix)

    first = make_agent(_model(), [lookup], a.middlewares())
    with a.acting_for(ALICE):
        await drain(first, UserMsg("user", "research"))
    on_a = a.last_report(first)
    assert on_a.reason == "budget" and on_a.spent_usd > 0.75 * QUOTA  # Alice's quota is (nearly) spent

    # worker B boots 3 days behind: its first store call (Bob's request) reads the offset
    monkeypatch.setattr(redis_store, "_wall", lambda: time.time() - 3 * 86400, raising=False)
    bobs = make_agent(ScriptedModel([text("hi bob")]), [lookup], b.middlewares())
    with b.acting_for(BOB):
        await drain(bobs, UserMsg("user", "hello"))
    assert b.last_report(bobs).reason == "answered"
    # NTP steps B's host clock right, a few seconds later (well within CLOCK_READ_S)
    monkeypatch.setattr(redis_store, "_wall", time.time, raising=False)

    second = make_agent(_model(), [lookup], b.middlewares())
    with b.acting_for(ALICE):
        await drain(second, UserMsg("user", "research more"))
    on_b = b.last_report(second)
    total = on_a.spent_usd + on_b.spent_usd
    assert total <= QUOTA + 1e-9, (
        f"Alice's daily quota is ${QUOTA:.2f}: ${on_a.spent_usd:.2f} on worker A, then ${on_b.spent_usd:.2f} "
        f"more on worker B right after its clock was stepped ({on_b.model_calls} model calls) = ${total:.2f}"
    )

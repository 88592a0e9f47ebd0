"""RedisStore against a real redis-server (DESIGN 6.6): atomic increments
from many clients and processes, day keys that expire, outages."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from eco_store_worker import PROCS, TIMES, USD, run_workers
from scripted import STORE_DOWN, ScriptedModel, make_agent, run, text

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    DependencyDown,
    Harness,
    HarnessConfig,
    Principal,
    RateLimit,
    RedisStore,
    TerminalState,
)
from agentscope_harness.stores import today

DEAD_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def prefix(redis_url):
    """A key prefix of this test only; its keys are deleted afterwards."""
    import redis

    name = f"harness-test:{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{name}:*"):
        client.delete(key)
    client.close()


async def test_concurrent_increments_from_many_clients_are_atomic(redis_url, prefix):
    stores = [RedisStore(redis_url, prefix=prefix) for _ in range(PROCS)]
    started = time.monotonic()
    totals = await asyncio.gather(*[
        store.add_spend("acme/u-42", USD) for store in stores for _ in range(TIMES)
    ])
    elapsed = time.monotonic() - started
    total = await stores[0].get_spend("acme/u-42")
    assert total == PROCS * TIMES * USD == 50.0
    # INCRBYFLOAT returned each running total exactly once
    assert sorted(totals) == [USD * (i + 1) for i in range(PROCS * TIMES)]
    for store in stores:
        await store.aclose()
    print(f"\nRedisStore: {PROCS} clients x {TIMES} concurrent charges of ${USD} -> ${total} "
          f"in {elapsed:.3f}s")


async def test_several_processes_charging_find_the_exact_total(redis_url, prefix):
    started = time.monotonic()
    results = run_workers("redis", redis_url, prefix, "acme/u-42")
    elapsed = time.monotonic() - started
    store = RedisStore(redis_url, prefix=prefix)
    total = await store.get_spend("acme/u-42")
    await store.aclose()
    assert total == PROCS * TIMES * USD
    seen = sorted(t for totals, _ in results for t in totals)
    assert seen == [USD * (i + 1) for i in range(PROCS * TIMES)]
    print(f"\nRedisStore: {PROCS} processes x {TIMES} charges of ${USD} -> ${total} in {elapsed:.2f}s")


async def test_day_keys_expire_and_days_are_kept_apart(redis_url, prefix):
    import redis.asyncio as aredis

    store = RedisStore(redis_url, prefix=prefix, ttl_days=2)
    await store.add_spend("acme/u-42", 1.25)
    await store.add_spend("acme/u-42", 0.5, day="2020-01-01")
    client = aredis.Redis.from_url(redis_url)
    try:
        key = f"{prefix}:spend:{today()}:acme/u-42"
        assert float(await client.get(key)) == 1.25
        ttl = await client.ttl(key)
        assert 0 < ttl <= 2 * 86400
        assert await client.ttl(f"{prefix}:spend:2020-01-01:acme/u-42") > 0
    finally:
        await client.aclose()
    assert await store.get_spend("acme/u-42") == 1.25
    assert await store.get_spend("acme/u-42", day="2020-01-01") == 0.5
    assert await store.get_spend("acme/u-42", day="2020-01-02") == 0.0
    await store.aclose()


async def test_redis_outage_is_dependency_down():
    store = RedisStore(DEAD_URL)
    with pytest.raises(DependencyDown) as info:
        await store.get_spend("acme/u-42")
    assert "Redis store" in str(info.value)
    with pytest.raises(DependencyDown):
        await store.add_spend("acme/u-42", 1.0)
    await store.aclose()


async def test_redis_outage_fails_the_budget_closed():
    store = RedisStore(DEAD_URL)
    harness = Harness(HarnessConfig(
        cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)}), store=store,
    ), load_entry_points=False)
    model = ScriptedModel([text("Sure.")])
    agent = make_agent(model, [], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        _, final = await run(agent, "hi")
    assert model.calls == []
    assert final.get_text_content().startswith(STORE_DOWN)  # the truth: not the budget's words
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down")
    # which store: its address as the README tells it (an IP address is personal data to the report)
    [read] = [d for d in report.decisions if d.detail.startswith("daily spend not read")]
    assert "Redis store redis://[pii:ipv4]:1/0 is unavailable" in read.detail
    await store.aclose()


@pytest.mark.parametrize("limit", [
    {"cost": CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)})},
    {"concurrency_limits": [ConcurrencyLimit(scope="principal", max_in_flight=1)]},
    {"rate_limits": [RateLimit(scope="principal", calls_per_min=5)]},
], ids=["quota", "run_slot", "model_rate"])
async def test_a_redis_that_does_not_answer_is_named_where_the_run_fails_closed(redis_url, prefix, limit):
    """Round 183 a: Redis paused (``CLIENT PAUSE``) past the store's bound as a run opens:
    the run fails closed, and the decision saying so names the store, as it does when
    Redis answers with an error (README store row: "told as `redis://***@host:port/db`
    wherever it is told"). The bound's own timeout said only "spend store"."""
    import redis

    store = RedisStore(redis_url, prefix=prefix, timeout_s=0.3)
    harness = Harness(HarnessConfig(store=store, **limit), load_entry_points=False)
    model = ScriptedModel([text("Sure.")])
    agent = make_agent(model, [], harness.middlewares())
    admin = redis.Redis.from_url(redis_url)
    paused_until = time.monotonic() + 0.7
    admin.execute_command("CLIENT", "PAUSE", 700, "ALL")
    try:
        with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
            await run(agent, "hi")
    finally:
        await asyncio.sleep(max(paused_until - time.monotonic(), 0) + 0.05)  # the server answers again
        admin.close()
    report = harness.last_report(agent)
    assert report.reason == "dependency_down" and model.calls == []
    said = [d.detail for d in report.decisions if d.code == "dependency_down"]
    db = redis_url.rsplit("/", 1)[-1]
    assert any("(Redis store redis://" in detail and f"/{db}) is unavailable" in detail for detail in said), said
    await store.aclose()


async def test_redis_store_charges_a_harnessed_run(redis_url, prefix):
    store = RedisStore(redis_url, prefix=prefix)
    harness = Harness(HarnessConfig(
        cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1000.0, 1000.0)}), store=store,
    ), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("Sure.", inp=100, out=10)]), [], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        await run(agent, "hi")
    assert await store.get_spend("acme/u-42") == pytest.approx(0.11)
    await store.aclose()

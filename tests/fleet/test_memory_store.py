"""MemoryStore: bounded memory, and the guarantees every store shares, as
properties over generated interleavings on a clock the test drives."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness.stores import MemoryStore, today


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(coro):
    return asyncio.run(coro)


async def _past_and_live(store: Any, users: int) -> tuple[str | None, str | None]:
    """Spend of a past day, short holds, leases and rate steps for ``users``
    users; then today's spend, a live hold and a live lease (their ids)."""
    for i in range(users):
        await store.add_spend(f"u-{i}", 1.0, day="2020-01-01")
        await store.reserve_spend(f"u-{i}", 0.5, quota=5.0, ttl_s=30)
        await store.lease_acquire(f"u-{i}", 2, lease_s=30)
        await store.rate_acquire(f"u-{i}", per_min=60)
    await store.add_spend("u-0", 2.0)  # today: kept
    rid = await store.reserve_spend("u-0", 1.0, quota=5.0, ttl_s=600)  # live: kept
    lid = await store.lease_acquire("run:acme", 1, lease_s=600)  # live: kept
    return rid, lid


async def test_past_days_lapsed_holds_leases_and_full_buckets_are_dropped():
    clock = Clock()
    store = MemoryStore(retention_days=2, clock=clock, sweep_every_s=60)
    rid, lid = await _past_and_live(store, 100)
    await store.breaker_record("search", False, failures_to_open=1)  # open: kept
    await store.breaker_record("fetch", False, failures_to_open=5)
    await store.breaker_record("fetch", True, failures_to_open=5)  # closed clean: dropped at once
    assert len(store._spend["2020-01-01"]) == 100

    clock.now += 61  # a sweep is due at the next call
    await store.add_spend("u-1", 0.5)
    assert set(store._spend) == {today()}
    assert list(store._holds) == [(today(), "u-0")] and rid in store._holds[(today(), "u-0")]
    assert list(store._leases) == ["run:acme"] and lid in store._leases["run:acme"]
    assert store._rates == {}
    assert list(store._breakers) == ["search"]
    assert await store.get_spend("u-0") == 2.0
    assert await store.get_spend("u-0", day="2020-01-01") == 0.0


def test_retention_needs_at_least_today():
    try:
        MemoryStore(retention_days=0)
    except ValueError as exc:
        assert "today" in str(exc)
    else:
        raise AssertionError("retention_days=0 accepted")


steps = st.lists(st.tuples(st.floats(0, 30), st.integers(1, 40)), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(per_min=st.integers(1, 50), steps=steps)
def test_gcra_never_admits_more_than_the_rate_allows(per_min, steps):
    """Admitted units in any span [t_i, t_j] stay within one minute's burst
    plus the refill over the span; a refused call is admitted once it has
    waited what it was told (nothing else admitted meanwhile)."""
    clock = Clock()
    store = MemoryStore(clock=clock)
    admitted: list[tuple[float, int]] = []
    for dt, cost in steps:
        clock.now += dt
        wait = run(store.rate_acquire("k", per_min, cost))
        if wait == 0.0:
            admitted.append((clock.now, cost))
        elif cost <= per_min:
            probe = MemoryStore(clock=clock)
            probe._rates = dict(store._rates)
            clock.now += wait
            assert run(probe.rate_acquire("k", per_min, cost)) == 0.0
            clock.now -= wait
        else:
            assert wait == float("inf")
    for i, (t_i, _) in enumerate(admitted):
        total = 0
        for t_j, cost in admitted[i:]:
            total += cost
            assert total <= per_min + per_min * (t_j - t_i) / 60 + 1e-6


ops = st.lists(st.tuples(st.sampled_from(["reserve", "settle", "lapse"]),
                         st.integers(1, 8), st.integers(0, 8)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops=ops)
def test_reservations_never_let_the_committed_spend_pass_the_quota(ops):
    """Holds of random size, settled at or under the hold, some lapsing
    (their process crashed): committed + live holds never pass the quota."""
    clock = Clock()
    store = MemoryStore(clock=clock)
    quota, live = 10.0, []  # quarter-dollar units keep the sums exact
    for op, size, spent in ops:
        if op == "reserve":
            rid = run(store.reserve_spend("k", size * 0.25, quota, ttl_s=100))
            if rid:
                live.append((rid, size))
        elif op == "settle" and live:
            rid, size_held = live.pop(0)
            run(store.settle_spend("k", rid, min(spent, size_held) * 0.25))
        elif op == "lapse":
            clock.now += 101
            live.clear()
        committed = run(store.get_spend("k"))
        held = sum(size for _, size in live) * 0.25
        assert committed + held <= quota


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.sampled_from(["acquire", "release", "tick"]), max_size=80),
       cap=st.integers(1, 4))
def test_leases_never_exceed_the_cap_and_lapse(ops, cap):
    clock = Clock()
    store = MemoryStore(clock=clock)
    held: list[tuple[str, float]] = []
    for op in ops:
        live = [(lid, until) for lid, until in held if until > clock.now]
        if op == "acquire":
            lid = run(store.lease_acquire("k", cap, lease_s=10))
            assert (lid is not None) == (len(live) < cap)  # admitted exactly when a slot is free
            if lid:
                held.append((lid, clock.now + 10))
        elif op == "release" and live:
            run(store.lease_release("k", live[0][0]))
            held.remove(live[0])
        else:
            clock.now += 4


async def test_sqlite_drops_past_days_lapsed_holds_leases_and_full_buckets(tmp_path):
    """Red team: a SQLite file kept every day's spend, every lapsed hold of
    past days and every lapsed lease of keys never used again (30 days,
    1,500 spend rows after normal use). It keeps what ``MemoryStore`` keeps."""
    import sqlite3

    from agentscope_harness.stores import SQLiteStore

    clock = Clock()
    path = str(tmp_path / "h.db")
    store = SQLiteStore(path, clock=clock, retention_days=2, sweep_every_s=60)
    await _past_and_live(store, 20)

    clock.now += 61  # a sweep is due at the next write
    await store.add_spend("u-1", 0.5)
    with sqlite3.connect(path) as conn:
        days = {d for (d,) in conn.execute("SELECT day FROM harness_spend")}
        holds = conn.execute("SELECT key FROM harness_holds").fetchall()
        leases = conn.execute("SELECT key FROM harness_leases").fetchall()
        rates = conn.execute("SELECT count(*) FROM harness_rates").fetchone()[0]
    assert days == {today()} and holds == [("u-0",)] and leases == [("run:acme",)] and rates == 0
    assert await store.get_spend("u-0") == 2.0

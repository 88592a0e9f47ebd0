"""The same semantics from every store (memory, SQLite, Redis): spend
reservations, shared breakers, rate limits, concurrency leases."""

from __future__ import annotations

import asyncio
import math

import pytest

from agentscope_harness.stores import LedgerStore, today

KEY = "acme/u-42"


def test_every_store_satisfies_the_protocol(store: LedgerStore) -> None:
    assert isinstance(store, LedgerStore)


# ------------------------------------------------------------ reservations


async def test_reservations_count_against_the_quota_until_settled(store: LedgerStore) -> None:
    first = await store.reserve_spend(KEY, 0.5, quota=1.0)
    second = await store.reserve_spend(KEY, 0.5, quota=1.0)
    assert first and second and first != second
    assert await store.reserve_spend(KEY, 0.25, quota=1.0) is None  # holds fill it
    assert await store.get_spend(KEY) == 0.0  # holds are not spend
    assert await store.settle_spend(KEY, first, 0.25) == 0.25
    assert await store.reserve_spend(KEY, 0.25, quota=1.0) is not None  # the unused 0.25 is back
    assert await store.reserve_spend(KEY, 0.25, quota=1.0) is None


async def test_settling_above_the_hold_charges_what_was_spent(store: LedgerStore) -> None:
    rid = await store.reserve_spend(KEY, 0.25, quota=1.0)
    assert rid is not None
    assert await store.settle_spend(KEY, rid, 0.75) == 0.75
    assert await store.get_spend(KEY) == 0.75
    assert await store.reserve_spend(KEY, 0.5, quota=1.0) is None
    assert await store.add_spend(KEY, 0.125) == 0.875  # add_spend keeps working beside them


async def test_a_lapsed_hold_frees_the_quota_but_its_settlement_still_counts(
        store: LedgerStore) -> None:
    rid = await store.reserve_spend(KEY, 1.0, quota=1.0, ttl_s=0.05)
    assert rid is not None and await store.reserve_spend(KEY, 0.5, quota=1.0) is None
    await asyncio.sleep(0.1)  # the process that held it "crashed"
    again = await store.reserve_spend(KEY, 1.0, quota=1.0)
    assert again is not None
    assert await store.settle_spend(KEY, rid, 0.25) == 0.25  # a late settle: the money was spent


async def test_a_reservation_is_settled_once(store: LedgerStore) -> None:
    """A settle sent again (its first answer lost, its caller cancelled
    while the store took it) charges nothing more, late or not."""
    rid = await store.reserve_spend(KEY, 0.5, quota=1.0)
    assert rid is not None
    assert await store.settle_spend(KEY, rid, 0.4) == pytest.approx(0.4)
    assert await store.settle_spend(KEY, rid, 0.4) == pytest.approx(0.4)
    assert await store.get_spend(KEY) == pytest.approx(0.4)
    other = await store.reserve_spend(KEY, 0.5, quota=1.0, ttl_s=0.05)
    assert other is not None
    await asyncio.sleep(0.1)  # its hold lapsed: settled once all the same
    assert await store.settle_spend(KEY, other, 0.5) == pytest.approx(0.9)
    assert await store.settle_spend(KEY, other, 0.5) == pytest.approx(0.9)


async def test_float_charges_fill_the_quota_exactly(store: LedgerStore) -> None:
    rids = [await store.reserve_spend(KEY, 0.1, quota=1.0) for _ in range(10)]
    assert all(rids)
    assert await store.reserve_spend(KEY, 0.1, quota=1.0) is None


async def test_a_hold_is_charged_to_the_day_it_was_made(store: LedgerStore) -> None:
    rid = await store.reserve_spend(KEY, 0.5, quota=1.0, day="2020-01-01")
    assert rid is not None
    await store.settle_spend(KEY, rid, 0.5)  # "after midnight": no day given
    assert await store.get_spend(KEY, day="2020-01-01") == 0.5
    assert await store.get_spend(KEY, day=today()) == 0.0
    with pytest.raises(ValueError):
        await store.settle_spend(KEY, "not-an-id", 0.5)


# ----------------------------------------------------------------- breakers


async def test_consecutive_failures_open_the_breaker(store: LedgerStore) -> None:
    assert await store.breaker_allow("search", cooldown_s=60) == "closed"
    assert await store.breaker_record("search", False, failures_to_open=3) == "closed"
    assert await store.breaker_record("search", True, failures_to_open=3) == "closed"  # resets
    for _ in range(2):
        assert await store.breaker_record("search", False, failures_to_open=3) == "closed"
    assert await store.breaker_record("search", False, failures_to_open=3) == "open"
    assert await store.breaker_allow("search", cooldown_s=60) == "open"
    assert await store.breaker_allow("fetch", cooldown_s=60) == "closed"  # per tool
    # a late success of a call admitted before it opened does not close it
    assert await store.breaker_record("search", True, failures_to_open=3) == "open"
    assert await store.breaker_allow("search", cooldown_s=60) == "open"


async def test_one_probe_after_the_cooldown_and_its_outcome_decides(store: LedgerStore) -> None:
    assert await store.breaker_record("search", False, failures_to_open=1) == "open"
    decisions = await asyncio.gather(*[store.breaker_allow("search", cooldown_s=0) for _ in range(20)])
    assert sorted(decisions) == ["open"] * 19 + ["probe"]
    assert await store.breaker_record("search", True, failures_to_open=5) == "open"  # not the probe's: ignored
    assert await store.breaker_record("search", False, failures_to_open=5, probe=True) == "open"  # probe failed
    assert await store.breaker_allow("search", cooldown_s=60) == "open"  # another cooldown
    assert await store.breaker_allow("search", cooldown_s=0) == "probe"
    assert await store.breaker_record("search", False, failures_to_open=1) == "open"  # a stale failure: ignored
    assert await store.breaker_record("search", True, failures_to_open=5, probe=True) == "closed"
    assert await store.breaker_allow("search", cooldown_s=0) == "closed"


async def test_a_crashed_probe_frees_the_probe_after_its_lease(store: LedgerStore) -> None:
    await store.breaker_record("search", False, failures_to_open=1)
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=0.05) == "probe"
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=0.05) == "open"
    await asyncio.sleep(0.1)  # the prober never reported
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=60) == "probe"
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=60) == "open"


async def test_a_running_probe_is_held_past_its_lease_until_decided(store: LedgerStore) -> None:
    """``breaker_renew``: the fleet holds its probe while its call runs (round 158 c)."""
    await store.breaker_record("search", False, failures_to_open=1)
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=0.05) == "probe"
    assert await store.breaker_renew("search", 0.5)  # type: ignore[attr-defined]
    await asyncio.sleep(0.1)  # past the first lease
    assert await store.breaker_allow("search", cooldown_s=0, probe_lease_s=60) == "open"  # still held
    assert await store.breaker_record("search", True, failures_to_open=1, probe=True) == "closed"
    assert not await store.breaker_renew("search", 0.5)  # type: ignore[attr-defined]  # decided: nothing held


# -------------------------------------------------------------- rate limits


async def test_rate_admits_a_minute_of_calls_then_says_when(store: LedgerStore) -> None:
    waits = [await store.rate_acquire("acme/u-42:calls", per_min=6) for _ in range(8)]
    assert waits[:6] == [0.0] * 6
    assert all(0 < w <= 10.0 for w in waits[6:])  # one call refills every 10 s
    assert await store.rate_acquire("acme/u-7:calls", per_min=6) == 0.0  # per key


async def test_rate_counts_tokens_by_cost(store: LedgerStore) -> None:
    assert await store.rate_acquire("tok", per_min=1000, cost=600) == 0.0
    wait = await store.rate_acquire("tok", per_min=1000, cost=600)
    assert wait == pytest.approx(12.0, abs=0.5)  # 200 tokens short at 1000/min
    assert await store.rate_acquire("tok", per_min=1000, cost=400) == 0.0  # the refused call took nothing
    assert await store.rate_acquire("tok", per_min=1000, cost=1001) == math.inf


async def test_units_given_back_are_admitted_again_and_never_beyond_a_full_bucket(store: LedgerStore) -> None:
    from agentscope_harness.stores import RateRefund

    assert isinstance(store, RateRefund)
    assert [await store.rate_acquire("r", per_min=2) for _ in range(2)] == [0.0, 0.0]
    assert await store.rate_acquire("r", per_min=2) > 0
    await store.rate_refund("r", per_min=2)  # the second call did not run
    assert await store.rate_acquire("r", per_min=2) == 0.0
    assert await store.rate_acquire("r", per_min=2) > 0
    for _ in range(5):  # more given back than taken: a full bucket, no more
        await store.rate_refund("r", per_min=2)
    assert [await store.rate_acquire("r", per_min=2) for _ in range(3)][:2] == [0.0, 0.0]
    assert await store.rate_acquire("r", per_min=2) > 0
    await store.rate_refund("never-taken", per_min=2)  # nothing to give back: no error
    with pytest.raises(ValueError):
        await store.rate_acquire("tok", per_min=0)


# ------------------------------------------------------------------ leases


async def test_leases_cap_in_flight_and_release_frees_a_slot(store: LedgerStore) -> None:
    held = [await store.lease_acquire("tool:search", 3, lease_s=60) for _ in range(3)]
    assert all(held) and len(set(held)) == 3
    assert await store.lease_acquire("tool:search", 3, lease_s=60) is None
    assert await store.lease_acquire("tool:fetch", 3, lease_s=60) is not None  # per key
    await store.lease_release("tool:search", held[0])  # type: ignore[arg-type]
    await store.lease_release("tool:search", held[0])  # type: ignore[arg-type]  # twice: no-op
    assert await store.lease_acquire("tool:search", 3, lease_s=60) is not None
    assert await store.lease_acquire("tool:search", 3, lease_s=60) is None


async def test_a_renewed_lease_outlives_lease_s_and_a_lapsed_one_is_not_taken_again(store: LedgerStore) -> None:
    held = await store.lease_acquire("run:acme", 1, lease_s=0.3)
    assert held is not None
    for _ in range(4):  # 0.4 s in all: past lease_s, held throughout
        await asyncio.sleep(0.1)
        assert await store.lease_renew("run:acme", held, 0.3) is True
        assert await store.lease_acquire("run:acme", 1, lease_s=60) is None
    assert await store.lease_renew("run:acme", "no-such-lease", 60) is False
    await store.lease_release("run:acme", held)
    assert await store.lease_renew("run:acme", held, 60) is False  # released: not taken again
    short = await store.lease_acquire("run:acme", 1, lease_s=0.05)
    assert short is not None
    await asyncio.sleep(0.1)
    assert await store.lease_renew("run:acme", short, 60) is False  # lapsed: not taken again
    assert await store.lease_acquire("run:acme", 1, lease_s=60) is not None


async def test_a_crashed_holder_frees_its_lease_after_lease_s(store: LedgerStore) -> None:
    assert await store.lease_acquire("run:acme", 1, lease_s=0.05) is not None
    assert await store.lease_acquire("run:acme", 1, lease_s=60) is None
    await asyncio.sleep(0.1)
    assert await store.lease_acquire("run:acme", 1, lease_s=60) is not None

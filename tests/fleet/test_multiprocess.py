"""4 processes x 50 operations against shared limits, on Redis (many hosts)
and SQLite (one host): exact admission counted from the store and from the
workers' own logs, one half-open probe, no quota overshoot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fleet_worker import OPS, PROCS, Fleet, call_estimate

from agentscope_harness.stores import RedisStore, SQLiteStore

ALL = PROCS * OPS


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    workers = Fleet()
    yield workers
    workers.close()


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str, str]:
    """``(backend, target, prefix)`` for the workers."""
    if request.param == "sqlite":
        path = str(tmp_path / "fleet.db")
        SQLiteStore(path)  # the schema, once
        return "sqlite", path, ""
    return "redis", request.getfixturevalue("redis_url"), request.getfixturevalue("prefix")


def flat(logs: list[list]) -> list:
    return [entry for log in logs for entry in log]


def store_of(backend: tuple[str, str, str]) -> RedisStore | SQLiteStore:
    kind, target, prefix = backend
    return SQLiteStore(target) if kind == "sqlite" else RedisStore(target, prefix=prefix)


async def test_a_lease_limit_of_3_admits_exactly_3_of_200(fleet, backend):
    logs = fleet.run(*backend, "lease_hold", "tool:search")
    granted = [lid for lid in flat(logs) if lid is not None]
    assert len(granted) == 3 and len(set(granted)) == 3
    store = store_of(backend)
    assert await store.lease_acquire("tool:search", 3, lease_s=60) is None  # the store agrees
    if isinstance(store, RedisStore):
        import redis.asyncio as aredis

        client = aredis.Redis.from_url(backend[1])
        members = {m.decode() for m in await client.zrange(f"{backend[2]}:lease:tool:search", 0, -1)}
        await client.aclose()
        assert members == set(granted)
        await store.aclose()


async def test_leases_churned_by_4_processes_never_exceed_3_in_flight(fleet, backend):
    logs = fleet.run(*backend, "lease_churn", "tool:slow")
    entries = flat(logs)
    admitted = [n for n in entries if n is not None]
    assert len(entries) == ALL and admitted
    assert max(admitted) <= 3  # counted independently of the store, in shared memory
    store = store_of(backend)
    got = [await store.lease_acquire("tool:slow", 3, lease_s=60) for _ in range(4)]
    assert sum(g is not None for g in got) == 3  # every worker released what it held
    if isinstance(store, RedisStore):
        await store.aclose()


async def test_a_rate_of_5_per_minute_admits_exactly_5_of_200(fleet, backend):
    logs = fleet.run(*backend, "rate", "acme/u-42:calls")
    waits = flat(logs)
    assert waits.count(0.0) == 5
    assert all(0 < w <= 60 for w in waits if w)  # the others were told when
    store = store_of(backend)
    assert await store.rate_acquire("acme/u-42:calls", per_min=5) > 0
    if isinstance(store, RedisStore):
        await store.aclose()


async def test_a_token_rate_admits_exactly_what_fits(fleet, backend):
    logs = fleet.run(*backend, "tokens", "acme:tokens")
    assert flat(logs).count(0.0) == 1000 // 30  # 33 calls of 30 tokens in 1000/min


@pytest.mark.parametrize("scenario, admitted", [
    ("reserve", 40),  # hold 0.25, spend 0.25: the quota of 10 fills exactly
    ("reserve_under", 39),  # hold 0.5, spend 0.25: at 9.75 a hold of 0.5 no longer fits
])
async def test_reservations_from_4_processes_never_overshoot_the_quota(
        fleet, backend, scenario, admitted):
    logs = fleet.run(*backend, scenario, "acme/u-42")
    totals = [t for t in flat(logs) if t is not None]
    assert len(totals) == admitted
    assert sorted(totals) == [0.25 * (i + 1) for i in range(admitted)]  # each total seen once
    assert max(totals) <= 10.0
    store = store_of(backend)
    assert await store.get_spend("acme/u-42") == 0.25 * admitted
    assert await store.reserve_spend("acme/u-42", 0.5, quota=10.0) is None
    if isinstance(store, RedisStore):
        await store.aclose()


async def test_the_half_open_probe_is_admitted_exactly_once_across_processes(fleet, backend):
    store = store_of(backend)
    assert await store.breaker_record("search", False, failures_to_open=1) == "open"
    for _ in range(2):  # a failed probe re-opens: the next cooldown has one probe too
        decisions = flat(fleet.run(*backend, "allow", "search"))
        assert decisions.count("probe") == 1 and decisions.count("open") == ALL - 1
        assert await store.breaker_record("search", False, failures_to_open=1, probe=True) == "open"
    decisions = flat(fleet.run(*backend, "allow", "search"))
    assert decisions.count("probe") == 1
    assert await store.breaker_record("search", True, failures_to_open=1, probe=True) == "closed"
    assert set(flat(fleet.run(*backend, "allow", "search"))) == {"closed"}
    if isinstance(store, RedisStore):
        await store.aclose()


# ------------------------------------------------- whole harnesses, 4 processes


async def test_a_tool_rate_of_5_per_minute_runs_the_tool_exactly_5_times_in_200_runs(fleet, backend):
    runs = flat(fleet.run(*backend, "harness_rate", "u-rate"))
    assert len(runs) == ALL
    assert sum(ran for ran, *_ in runs) == 5  # counted from the tools themselves
    refused = [told for ran, told, *_ in runs if not ran]
    assert len(refused) == ALL - 5 and all(t.startswith("[harness:rate_limited]") for t in refused)
    store = store_of(backend)
    assert await store.rate_acquire("rate:tool=search:calls:tool:*", per_min=5) > 0  # the store agrees
    if isinstance(store, RedisStore):
        await store.aclose()


async def test_the_half_open_probe_runs_the_tool_once_across_4_harness_processes(fleet, backend):
    store = store_of(backend)
    assert await store.breaker_record("search", False, failures_to_open=1) == "open"
    fleet.in_flight.value = 0  # runs finished: the probe's tool waits for all the others
    runs = flat(fleet.run(*backend, "harness_probe", "u-probe"))
    assert sum(ran for ran, *_ in runs) == 1
    refused = [told for ran, told, *_ in runs if not ran]
    assert len(refused) == ALL - 1 and all(t.startswith("[harness:dependency_down]") for t in refused)
    assert await store.breaker_allow("search", cooldown_s=0) == "closed"  # the probe closed it
    if isinstance(store, RedisStore):
        await store.aclose()


async def test_200_concurrent_runs_of_one_principal_in_4_processes_never_overshoot_the_quota(
        fleet, backend):
    quota = 30 * await call_estimate()  # 30 calls fit if each spent its whole estimate
    runs = flat(fleet.run(*backend, "harness_quota", f"u-quota|{quota!r}"))
    store = store_of(backend)
    spent = await store.get_spend("acme/u-quota")
    assert spent <= quota and sum(usd for *_, usd, _ in runs) == pytest.approx(spent)
    answered = [r for r in runs if r[3] != "budget"]
    assert len(answered) >= 30 and len(answered) < ALL  # settled holds freed room; not all fit
    assert await store.reserve_spend("acme/u-quota", quota - spent, quota) is not None  # none left held
    if isinstance(store, RedisStore):
        await store.aclose()

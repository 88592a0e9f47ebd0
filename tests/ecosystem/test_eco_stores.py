"""Daily-spend stores (DESIGN 6.6): SQLite across processes, outages fail the
budget closed."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from eco_store_worker import PROCS, TIMES, USD, run_workers
from scripted import STORE_DOWN, ScriptedModel, calls, decisions, make_agent, run, text

from agentscope_harness import (
    CostPolicy,
    DependencyDown,
    Harness,
    HarnessConfig,
    MemoryStore,
    Principal,
    SQLiteStore,
    TerminalState,
)


async def test_sqlite_store_several_processes_find_the_exact_total(tmp_path):
    path = str(tmp_path / "spend.db")
    SQLiteStore(path)  # create the schema once
    started = time.monotonic()
    results = run_workers("sqlite", path, "", "acme/u-42")
    elapsed = time.monotonic() - started

    store = SQLiteStore(path)
    total = await store.get_spend("acme/u-42")
    assert total == PROCS * TIMES * USD == 50.0
    # every increment saw a distinct running total: none was lost or doubled
    seen = sorted(t for totals, _ in results for t in totals)
    assert seen == [USD * (i + 1) for i in range(PROCS * TIMES)]
    assert await store.get_spend("acme/u-43") == 0.0
    print(f"\nSQLiteStore: {PROCS} processes x {TIMES} charges of ${USD} -> ${total} "
          f"(expected ${PROCS * TIMES * USD}) in {elapsed:.2f}s")


async def test_sqlite_store_keeps_days_apart(tmp_path):
    store = SQLiteStore(str(tmp_path / "spend.db"))
    await store.add_spend("k", 1.5, day="2026-01-01")
    await store.add_spend("k", 0.5, day="2026-01-02")
    assert await store.get_spend("k", day="2026-01-01") == 1.5
    assert await store.get_spend("k", day="2026-01-02") == 0.5
    assert await store.get_spend("k", day="2026-01-03") == 0.0


def test_sqlite_store_in_a_missing_directory_is_dependency_down(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "spend.db"
    with pytest.raises(DependencyDown) as info:
        SQLiteStore(str(path))
    assert str(path) in str(info.value)
    assert info.value.dependency.startswith("SQLite store")


async def test_sqlite_store_outage_after_start_is_dependency_down(tmp_path):
    path = tmp_path / "spend.db"
    store = SQLiteStore(str(path))
    await store.add_spend("k", 1.0)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    shutil.rmtree(tmp_path, ignore_errors=True)  # the directory is gone too
    with pytest.raises(DependencyDown):
        await store.get_spend("k")
    with pytest.raises(DependencyDown):
        await store.add_spend("k", 1.0)


# ------------------------------------------------------- budget fails closed


class SpendStoreDown:
    """A store whose backend is unreachable."""

    def __init__(self, fail_get: bool = True, fail_add: bool = True) -> None:
        self.fail_get, self.fail_add = fail_get, fail_add
        self.added: list[tuple[str, float]] = []

    async def get_spend(self, key, day=None):
        if self.fail_get:
            raise ConnectionError("spend-db: connection refused")
        return 0.0

    async def add_spend(self, key, usd, day=None):
        if self.fail_add:
            raise DependencyDown("spend-db", "connection refused")
        self.added.append((key, usd))
        return usd


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"results for {q}"


def quota_config(store, quota: float = 1.0) -> HarnessConfig:
    return HarnessConfig(
        cost=CostPolicy(daily_quota_usd=quota, prices={"scripted": (2.0, 8.0)}, max_output_tokens=64),
        store=store,
    )


async def test_store_outage_fails_the_budget_closed():
    store = SpendStoreDown()
    harness = Harness(quota_config(store), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "tv"})), text("Here you go.")])
    agent = make_agent(model, [search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        events, final = await run(agent, "find a tv")

    assert model.calls == []  # no money is spent when the spend cannot be checked
    assert final.get_text_content().startswith(STORE_DOWN)  # the truth: not the budget's words
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.INCOMPLETE
    assert report.reason == "dependency_down"
    assert any(d["code"] == "dependency_down" for d in decisions(events))
    assert store.added == []


async def test_working_store_lets_the_same_run_through():
    store = SpendStoreDown(fail_get=False, fail_add=False)
    harness = Harness(quota_config(store), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "tv"})), text("Here you go.")])
    agent = make_agent(model, [search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        _, final = await run(agent, "find a tv")
    assert len(model.calls) == 2
    assert final.get_text_content() == "Here you go."
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED
    # charged as it is spent, one model call at a time
    assert [key for key, _ in store.added] == ["acme/u-42", "acme/u-42"]
    assert sum(usd for _, usd in store.added) == pytest.approx(report.spent_usd)
    assert report.spent_usd == pytest.approx((200 * 2.0 + 20 * 8.0) / 1e6)


async def test_charging_outage_after_the_run_is_recorded_not_swallowed():
    store = SpendStoreDown(fail_get=False, fail_add=True)
    harness = Harness(quota_config(store), load_entry_points=False)
    model = ScriptedModel([text("Hello.")])
    agent = make_agent(model, [search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42")):
        await run(agent)
    report = harness.last_report(agent)
    charged = [d for d in report.decisions if d.code == "dependency_down"]
    assert charged and "not charged" in charged[0].detail


async def test_sqlite_store_carries_the_daily_quota_across_harnesses(tmp_path):
    path = str(tmp_path / "spend.db")
    principal = Principal(user_id="u-42", tenant="acme")

    # process 1: a run that spends, charged to the file
    h1 = Harness(quota_config(SQLiteStore(path), quota=0.01), load_entry_points=False)
    model = ScriptedModel([text("Hello.", inp=300, out=10)])
    agent = make_agent(model, [search], h1.middlewares())
    with h1.acting_for(principal):
        await run(agent)
    spent = h1.last_report(agent).spent_usd
    assert await SQLiteStore(path).get_spend(principal.key) == pytest.approx(spent)

    # "another process": a fresh Harness on the same file sees the quota used
    h2 = Harness(quota_config(SQLiteStore(path), quota=spent), load_entry_points=False)
    model2 = ScriptedModel([text("Hello again.")])
    agent2 = make_agent(model2, [search], h2.middlewares())
    with h2.acting_for(principal):
        _, final = await run(agent2)
    assert model2.calls == []
    assert final.get_text_content() == h2.config.cost.fallback_text
    assert h2.last_report(agent2).terminal_state == TerminalState.INCOMPLETE

    # a different principal still has its quota (h1's: a call's reservation,
    # its estimated cost, does not fit in a quota of exactly one call's cost)
    agent3 = make_agent(ScriptedModel([text("Hi.")]), [search], h1.middlewares())
    with h1.acting_for(Principal(user_id="u-7", tenant="acme")):
        _, final3 = await run(agent3)
    assert final3.get_text_content() == "Hi."


def test_memory_store_is_the_default():
    assert isinstance(Harness(load_entry_points=False).store, MemoryStore)

"""Round 142 d (scenarios: around the hooks). README "Running many workers", what
fails closed: "a store that does not answer within its `timeout_s` (2 s) or before
the run's deadline: budgets, reservations and limits refuse with `dependency_down`
(...; a deadline that comes first ends the run `deadline`)".

Attack: `deadline_s=1`, a `SQLiteStore(path, timeout_s=3)` whose file another
connection holds locked (a backup, a VACUUM) while the run reserves its daily quota or
takes its run slot: the deadline comes long before the store's timeout.
What happened: the run ended at 1 s `incomplete` (`dependency_down`), the user told
"a service it needs is unavailable" (a dashboard pages for a store outage).
"""
from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    SQLiteStore,
    TerminalState,
)
from tests.scripted import ALICE, ScriptedModel, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("where", ["model_call_quota", "run_slot"])
async def test_a_store_wait_the_deadline_cuts_ends_the_run_at_its_deadline(tmp_path: Any, where: str) -> None:
    path = str(tmp_path / "harness.db")
    limits: dict[str, Any] = (
        {"cost": CostPolicy(daily_quota_usd=1.0, prices={"scripted": (1.0, 1.0)})} if where == "model_call_quota"
        else {"concurrency_limits": [ConcurrencyLimit(scope="principal", max_in_flight=2)]}
    )
    h = Harness(HarnessConfig(store=SQLiteStore(path, timeout_s=3.0), deadline_s=1.0, **limits),
                load_entry_points=False, environ={})
    model = ScriptedModel([text("Hello.")])
    agent = make_agent(model, [search], h.middlewares())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holds the file
    try:
        started = time.monotonic()
        with h.acting_for(ALICE):
            _, final = await run(agent, "hello")
        took = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    report = h.last_report(agent)
    assert took < 2.5  # the deadline, not the store's timeout, ended the wait
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline"), report.reason
    assert "unavailable" not in (final.get_text_content() or "")
    assert model.calls == []  # nothing was sent past the deadline

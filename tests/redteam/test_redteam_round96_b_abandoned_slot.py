"""Red team, round 96 (b). A tool the deadline cut and then abandoned (slow
to stop: its rollback still runs in its own task) gives its tool
concurrency slot back at once, so the next call of that tool runs beside
it: ``ConcurrencyLimit(scope="tool", max_in_flight=1)`` lets two calls be
in flight. Before round 95 the run waited for the cancelled tool to stop,
and its slot went back only then. README: the report lists the call in
``in_flight`` ("side effects that may still happen"), and "Running many
workers": "A slot is held as long as its run or call lasts"."""

from __future__ import annotations

from rollback_kit import Migrations
from scripted import ALICE, run


async def test_an_abandoned_tool_still_rolling_back_keeps_its_tool_slot() -> None:
    migrations = Migrations(rollback_s=0.6)
    first = migrations.agent("orders", "never", "ops1")
    with migrations.harness.acting_for(ALICE):
        await run(first, "migrate orders")
    cut = migrations.harness.last_report(first)
    assert any(e.startswith("migrate_db:") for e in cut.in_flight), cut.in_flight
    assert migrations.running == ["orders"]  # its rollback still runs in its task
    await migrations.assert_the_next_waits()

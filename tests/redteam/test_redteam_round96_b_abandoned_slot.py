"""Red team, round 96 (b). A tool the deadline cut and then abandoned (slow
to stop: its rollback still runs in its own task) gives its tool
concurrency slot back at once, so the next call of that tool runs beside
it: ``ConcurrencyLimit(scope="tool", max_in_flight=1)`` lets two calls be
in flight. Before round 95 the run waited for the cancelled tool to stop,
and its slot went back only then. README: the report lists the call in
``in_flight`` ("side effects that may still happen"), and "Running many
workers": "A slot is held as long as its run or call lasts"."""

from __future__ import annotations

import asyncio

from scripted import ALICE, BOB, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig

ROLLBACK_S = 0.6


async def test_an_abandoned_tool_still_rolling_back_keeps_its_tool_slot() -> None:
    running: list[str] = []
    most = [0]

    async def migrate_db(table: str) -> str:
        """Migrate one table (one migration at a time on this database).

        Args:
            table (str): The table.
        """
        running.append(table)
        most[0] = max(most[0], len(running))
        try:
            await asyncio.sleep(0.0 if table == "invoices" else 5)
        except asyncio.CancelledError:
            await asyncio.sleep(ROLLBACK_S)  # the rollback of a half-done migration
            raise
        finally:
            running.remove(table)
        return f"migrated {table}"

    h = Harness(HarnessConfig(
        deadline_s=0.2,
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="migrate_db", max_in_flight=1)],
    ), load_entry_points=False, environ={})
    first = make_agent(ScriptedModel([calls(("migrate_db", {"table": "orders"})), text("never")]),
                       [tool(migrate_db, is_concurrency_safe=False)], h.middlewares(), name="ops1")
    with h.acting_for(ALICE):
        await run(first, "migrate orders")
    cut = h.last_report(first)
    assert any(e.startswith("migrate_db:") for e in cut.in_flight), cut.in_flight
    assert running == ["orders"]  # its rollback still runs in its task

    second = make_agent(ScriptedModel([calls(("migrate_db", {"table": "invoices"})), text("Done.")]),
                        [tool(migrate_db, is_concurrency_safe=False)], h.middlewares(), name="ops2")
    with h.acting_for(BOB):
        await run(second, "migrate invoices")
    await asyncio.sleep(ROLLBACK_S)
    assert most[0] == 1, "two migrate_db calls were in flight under max_in_flight=1"

"""Red team, round 97 (a). A tool the deadline cut is given TOOL_GRACE_S to
stop; round 96 keeps the slots of one still stopping until its task ends
(``_Cut(tool)``, ``release_call(until=task)``). But when the caller's own
stop lands in that grace window (the user presses stop, or the web framework
times the request out, just after the deadline), ``_within_deadline`` leaves
the tool task running (``add_done_callback(_retrieved); raise``) and the
run's close frees the call's slot at once (``Fleet.close_run``): the next
call of the tool runs beside the one still rolling back, under
``ConcurrencyLimit(scope="tool", max_in_flight=1)``."""

from __future__ import annotations

import asyncio
import contextlib

from scripted import ALICE, BOB, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig

ROLLBACK_S = 0.8
REQUEST: list[asyncio.Task] = []


async def test_a_stop_in_the_grace_window_keeps_the_stopping_tools_slot() -> None:
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
            # the user presses stop as the deadline's cut lands (within its grace to stop)
            asyncio.get_running_loop().call_later(0.02, REQUEST[0].cancel)
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

    async def request() -> None:
        with h.acting_for(ALICE):
            await run(first, "migrate orders")

    task = asyncio.create_task(request())
    REQUEST.append(task)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert running == ["orders"]  # its rollback still runs in its task

    second = make_agent(ScriptedModel([calls(("migrate_db", {"table": "invoices"})), text("Done.")]),
                        [tool(migrate_db, is_concurrency_safe=False)], h.middlewares(), name="ops2")
    with h.acting_for(BOB):
        await run(second, "migrate invoices")
    await asyncio.sleep(ROLLBACK_S)
    assert most[0] == 1, "two migrate_db calls were in flight under max_in_flight=1"

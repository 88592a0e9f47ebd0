"""Red-team helpers: a tool the run's deadline cuts that is slow to stop (it
rolls back), under a tool concurrency limit of one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from scripted import BOB, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig


class Migrations:
    """``migrate_db`` (one migration at a time on this database): the
    ``invoices`` table migrates at once, any other waits to be cut and then
    rolls back for ``rollback_s`` (``on_cancel`` called as it starts to);
    ``running`` and ``most`` say what was in flight."""

    def __init__(self, rollback_s: float, on_cancel: Callable[[], Any] | None = None) -> None:
        self.rollback_s = rollback_s
        self.running: list[str] = []
        self.most = 0

        async def migrate_db(table: str) -> str:
            """Migrate one table (one migration at a time on this database).

            Args:
                table (str): The table.
            """
            self.running.append(table)
            self.most = max(self.most, len(self.running))
            try:
                await asyncio.sleep(0.0 if table == "invoices" else 5)
            except asyncio.CancelledError:
                if on_cancel is not None:
                    on_cancel()
                await asyncio.sleep(rollback_s)  # the rollback of a half-done migration
                raise
            finally:
                self.running.remove(table)
            return f"migrated {table}"

        self.migrate_db: Callable[[str], Awaitable[str]] = migrate_db
        self.harness = Harness(HarnessConfig(
            deadline_s=0.2,
            concurrency_limits=[ConcurrencyLimit(scope="tool", tool="migrate_db", max_in_flight=1)],
        ), load_entry_points=False, environ={})

    def agent(self, table: str, answer: str, name: str) -> Any:
        """An agent whose model migrates ``table``, then says ``answer``."""
        return make_agent(ScriptedModel([calls(("migrate_db", {"table": table})), text(answer)]),
                          [tool(self.migrate_db, is_concurrency_safe=False)], self.harness.middlewares(), name=name)

    async def assert_the_next_waits(self) -> None:
        """Another user's migration while the first still rolls back: never two in flight."""
        with self.harness.acting_for(BOB):
            await run(self.agent("invoices", "Done.", "ops2"), "migrate invoices")
        await asyncio.sleep(self.rollback_s)
        assert self.most == 1, "two migrate_db calls were in flight under max_in_flight=1"

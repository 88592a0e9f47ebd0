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

from rollback_kit import Migrations
from scripted import ALICE, run

REQUEST: list[asyncio.Task] = []


async def test_a_stop_in_the_grace_window_keeps_the_stopping_tools_slot() -> None:
    # the user presses stop as the deadline's cut lands (within its grace to stop)
    migrations = Migrations(rollback_s=0.8,
                            on_cancel=lambda: asyncio.get_running_loop().call_later(0.02, REQUEST[0].cancel))
    first = migrations.agent("orders", "never", "ops1")

    async def request() -> None:
        with migrations.harness.acting_for(ALICE):
            await run(first, "migrate orders")

    task = asyncio.create_task(request())
    REQUEST.append(task)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert migrations.running == ["orders"]  # its rollback still runs in its task
    await migrations.assert_the_next_waits()

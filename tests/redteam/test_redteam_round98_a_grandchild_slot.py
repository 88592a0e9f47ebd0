"""Red team, round 98 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``. A lead's tool starts a sub-agent in a background task;
that sub-agent's own tool starts a grandchild in a background task of its
own and the sub-agent answers at once. Round 97 keeps the lead's run slot
while a nested run still runs (``Fleet.close_run``: ``run.open_children``),
but only direct children are counted: the sub-agent's settle empties the
lead's ``open_children`` and ``after_nested`` gives the slot back, though the
grandchild (listed in the lead's ``in_flight`` as ``migrator/sub_run:...``)
is still running. A second run of the principal is admitted and completes
beside it: two runs' work in flight under a limit of one (README: "A slot
is held as long as its run or call lasts")."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.message import UserMsg
from background_kit import assert_second_run_refused, spawner
from scripted import ALICE, ScriptedModel, calls, make_agent, run, slow, slow_started, text

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig


async def test_a_background_grandchild_still_running_keeps_its_principals_run_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    background: list[asyncio.Task[Any]] = []
    grandchild = make_agent(ScriptedModel([calls(("slow", {"seconds": 0.6})), text("copied")]), [slow],
                            h.middlewares(), name="copier")

    async def copy_later(task: str) -> str:
        """Start the copier in the background.

        Args:
            task (str): What it should do.
        """
        background.append(asyncio.create_task(grandchild.reply(UserMsg("migrator", task))))
        return "copier started"

    child = make_agent(ScriptedModel([calls(("copy_later", {"task": "copy"})), text("handed over")]), [copy_later],
                       h.middlewares(), name="migrator")

    spawn = spawner(child, background)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]), [spawn],
                      h.middlewares(), name="lead")
    try:
        with h.acting_for(ALICE):
            await run(lead, "migrate my data")
            await slow_started()
            while h.last_report(child) is None:  # the migrator handed over and settled
                await asyncio.sleep(0.01)
            await assert_second_run_refused(h, "a second run of the principal ran beside its first run's grandchild")
    finally:
        await asyncio.gather(*background)

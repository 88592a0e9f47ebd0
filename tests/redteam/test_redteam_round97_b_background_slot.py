"""Red team, round 97 (b). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``: one run of a principal in flight at a time (README,
``concurrency_limits``: "runs in flight per principal or tenant"; "A slot is
held as long as its run or call lasts"). A lead's tool starts a sub-agent in
a background task; the lead settles, its report listing the sub-agent and its
running call in ``in_flight`` ("side effects that may still happen"), and
gives its slot back. Only a root run ever takes a slot
(``fleet.open_run``: ``run.parent is None``), so nothing holds one for the
sub-agent still running: a second run of the same principal is admitted and
completes beside it, two runs of one principal in flight under a limit of one."""

from __future__ import annotations

import asyncio
from typing import Any

from background_kit import assert_second_run_refused, spawner
from scripted import ALICE, ScriptedModel, calls, make_agent, run, slow, slow_started, text

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig


async def test_a_background_sub_agent_still_running_keeps_its_principals_run_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("slow", {"seconds": 0.5})), text("migrated")]), [slow],
                       h.middlewares(), name="migrator")
    background: list[asyncio.Task[Any]] = []

    spawn = spawner(child, background)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]), [spawn],
                      h.middlewares(), name="lead")
    try:
        with h.acting_for(ALICE):
            await run(lead, "migrate my data")
            assert any(e.startswith("sub_run:migrator:") for e in h.last_report(lead).in_flight)
            await slow_started()
            await assert_second_run_refused(h, "a second run of the principal ran beside its first run's sub-agent")
    finally:
        await asyncio.gather(*background)

"""Red team, round 98 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``. A lead's tool starts a sub-agent in a background task,
then the lead waits on its client (a client-executed tool): it parks.
``Fleet.park_run`` gives its run slot back at once (a run waiting for a
human is not in flight), with no regard for the sub-agent still running:
round 97 made a settled run keep its slots while a nested run still runs
(``close_run``: "a nested run still running ... is the run's work in
flight"), but a parked one does not. A second run of the principal is
admitted and completes beside the running sub-agent: two runs' work in
flight under a limit of one (README: "A slot is held as long as its run or
call lasts")."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from background_kit import assert_second_run_refused, spawner
from scripted import ALICE, ScriptedModel, calls, client_tool, drain, make_agent, slow, slow_started, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_parked_lead_keeps_its_slot_while_its_background_sub_agent_runs() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("slow", {"seconds": 0.6})), text("migrated")]), [slow],
                       h.middlewares(), name="migrator")
    background: list[asyncio.Task[Any]] = []

    spawn = spawner(child, background)

    lead_model = ScriptedModel([calls(("spawn", {"task": "migrate"})), calls(("verify_code", {"code": "1234"})),
                                text("under way")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(spawn), client_tool()])), h.middlewares(),
                      name="lead")
    try:
        with h.acting_for(ALICE):
            await drain(lead, UserMsg("user", "migrate my data"))
            assert h.last_report(lead).terminal_state is TerminalState.WAITING_INPUT
            await slow_started()
            await assert_second_run_refused(h, "a second run of the principal ran beside a parked run's sub-agent")
    finally:
        await asyncio.gather(*background)

"""Red team, round 98 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``. A lead's tool starts a sub-agent in a background task
and the lead settles; the sub-agent parks on its client (a client-executed
tool), which gives back the run slot the lead kept for it (``after_nested``:
a run waiting for a human is not in flight), as README says a parked run
does ("it takes them again on resume"). The client answers, the sub-agent
resumes (nested in its settled lead again: ``nest_on_resume``) and goes on
with a slow tool; but ``Fleet.open_run`` takes slots for a root run only,
and the lead's kept slot is gone, so nothing holds one: a second run of the
principal is admitted and completes beside the resumed sub-agent, two runs'
work in flight under a limit of one."""

from __future__ import annotations

import asyncio

from background_kit import migrator_parked_in_background
from scripted import ALICE, RAN, ScriptedModel, calls, drain, make_agent, run, search, text

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_resumed_sub_agent_of_a_settled_lead_holds_its_principals_run_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    with h.acting_for(ALICE):
        child, answer = await migrator_parked_in_background(h, 0.6)
        resumed = asyncio.create_task(drain(child, answer))
        try:
            while "slow:start" not in RAN:
                await asyncio.sleep(0.01)
            await run(other, "find my invoices")
        finally:
            await resumed
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED
    report = h.last_report(other)
    assert report.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, (
        f"a second run of the principal ran beside a resumed sub-agent: {report.terminal_state.value}, {RAN}"
    )

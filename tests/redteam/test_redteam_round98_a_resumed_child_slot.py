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

from background_kit import assert_second_run_refused, migrator_parked_in_background, while_resumed
from scripted import ALICE

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_resumed_sub_agent_of_a_settled_lead_holds_its_principals_run_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    with h.acting_for(ALICE):
        child, answer = await migrator_parked_in_background(h, 0.6)
        await while_resumed(child, answer, lambda: assert_second_run_refused(
            h, "a second run of the principal ran beside a resumed sub-agent"))
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED

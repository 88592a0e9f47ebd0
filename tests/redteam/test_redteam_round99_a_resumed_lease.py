"""Red team, round 99 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1, lease_s=1.0)``. A lead's tool starts a sub-agent in the
background and the lead settles; the sub-agent parks on its client. The
client answers outside any run: the sub-agent resumes nested in its
settled lead (``nest_on_resume`` keeps the settled parent, but never puts
it back in its root's ``live_nested``: only ``_nest`` does). ``open_run``
takes the lead's slot again for it, but ``_Holds.renewable`` renews a
settled root's slots only while ``live_nested`` is non-empty: it is
empty, so the re-taken lease is never renewed and lapses after
``lease_s`` while the sub-agent still runs a slow tool. A second run of
the principal is then admitted beside it: two runs' work in flight under a
limit of one (README: a slot is "renewed while its run lasts")."""

from __future__ import annotations

import asyncio

from background_kit import assert_second_run_refused, migrator_parked_in_background, while_resumed
from scripted import ALICE

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_resumed_sub_agents_retaken_slot_is_renewed_while_it_runs() -> None:
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=1.0)  # no CI stall lapses it
    h = Harness(HarnessConfig(concurrency_limits=[limit]), load_entry_points=False, environ={})

    async def past_lease_s() -> None:
        await asyncio.sleep(1.6)  # well past lease_s: a renewed lease is still held
        await assert_second_run_refused(h, "the resumed sub-agent's slot lapsed unrenewed; a second run ran beside it")

    with h.acting_for(ALICE):
        child, answer = await migrator_parked_in_background(h, 3.0)
        await while_resumed(child, answer, past_lease_s)
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED

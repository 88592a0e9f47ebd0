"""Round 101 (a CI failure of round 100's test, made deterministic).
``ConcurrencyLimit(scope="principal", max_in_flight=1)`` on a SQLite file
whose lease releases take a while (a loaded machine: the store's thread
waits for a core). A lead starts a migrator in the background and settles;
the migrator parks on its client, so the lead's kept slot goes back, in the
background. The client answers at once: the migrator resumes under its
settled lead and takes the lead's slot again, but the give-back was still
on its way, so the store still held the lead's old slot: the migrator was
refused by its own lead's slot (``concurrency_limited``). Slots given back
in the background are now back before a run slot is taken (as before a
tool's)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from background_kit import migrator_parked_in_background
from scripted import ALICE, drain

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState
from agentscope_harness.stores import SQLiteStore


class SlowRelease(SQLiteStore):
    """A store whose lease releases take 0.3 s."""

    async def lease_release(self, key: str, lease_id: str, **kw: object) -> None:
        await asyncio.sleep(0.3)
        await super().lease_release(key, lease_id, **kw)


async def test_a_resume_right_after_its_leads_slot_went_back_is_not_refused_by_it(tmp_path: Path) -> None:
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1)
    h = Harness(HarnessConfig(store=SlowRelease(str(tmp_path / "fleet.db")), concurrency_limits=[limit]),
                load_entry_points=False, environ={})
    with h.acting_for(ALICE):
        child, answer = await migrator_parked_in_background(h, 0.01)
        await drain(child, answer)
    report = h.last_report(child)
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state.value, report.reason)

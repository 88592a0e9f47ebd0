"""Red team, round 99 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``. A lead's background sub-agent parks on its client after
the lead settled (the lead's kept slot goes back). The client answers and
the sub-agent resumes: ``Fleet.open_run`` re-takes the *lead's* slot for it
(``_take_run_slots(run, root)`` files an entry for the lead in ``_holds``
first) and only after that await sets the lead's ``after_nested``. The
resume is cancelled while the store is taking the lease: the sub-agent's
close drops its own entry, ``_nested_settled`` finds no ``after_nested``,
and the lead's entry stays in ``Fleet._holds`` for good (every such cancel
adds one; the renewer never sees the fleet idle)."""

from __future__ import annotations

import asyncio
import contextlib

from background_kit import migrator_parked_in_background
from scripted import ALICE, drain

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore


class SlowLeases(MemoryStore):
    """A store whose lease taking hangs once armed (a slow network round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.waiting = asyncio.Event()

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        if self.armed:
            self.waiting.set()
            await asyncio.Event().wait()
        return await super().lease_acquire(key, max_in_flight, lease_s, deadline=deadline)


async def test_a_resume_cancelled_while_retaking_the_leads_slot_leaves_no_holds() -> None:
    store = SlowLeases()
    config = HarnessConfig(store=store, concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)])
    h = Harness(config, load_entry_points=False, environ={})
    with h.acting_for(ALICE):
        child, answer = await migrator_parked_in_background(h, 0.1)
        store.armed = True
        resumed = asyncio.create_task(drain(child, answer))
        await asyncio.wait_for(store.waiting.wait(), 2)
        resumed.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await resumed
    await asyncio.sleep(0.05)
    fleet = h.services.fleet
    assert fleet._holds == {}, f"the settled lead's entry stays after the cancelled re-take: {list(fleet._holds)}"
    assert fleet._renewer is None or fleet._renewer.done()

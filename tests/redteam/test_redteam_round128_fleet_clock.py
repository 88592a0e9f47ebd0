"""Round 128 c: a worker whose host clock is stepped (NTP) after
``RedisStore`` read the server's clock offset spends a day of its own.

README, "Running many workers": "the daily spend and its per-call
reservations (`RedisStore` keeps them under the UTC day of the server's
clock, `TIME`, its offset to the worker's read once a minute: a worker whose
clock is off spends the fleet's day, never one of its own)"; "Concurrent runs
never spend past the quota as long as a call costs no more than its
estimate."

Attack: worker B boots with its host clock 3 days behind (a VM restored from
a snapshot, NTP not yet synced). Its first store call (Bob's request) reads
the offset (+3 days). Seconds later NTP steps the host clock right (the
offset is now 3 days too much, and is kept for `CLOCK_READ_S` = 60 s, since
it is timed on the monotonic clock but applied to the wall clock). Alice,
whose $2 quota worker A has spent, reaches worker B within that minute.

What happened: B computes `_wall() + offset` = server time + 3 days: it
reserves and charges against a day nobody spent on, and admits a second
full quota for Alice. Should: the server's time advanced by the monotonic
clock since it was read (``TIME`` at read + (monotonic() - read_at)), which
a wall-clock step cannot move.

Round 129 c: the monotonic clock that carries the server's `TIME` does not
count a suspend or a VM snapshot's downtime: a worker restored from a
snapshot spends, for its first minute, the snapshot's day (a day nobody
spent on), and a principal's daily quota is spent twice.

README, "Running many workers": "the daily spend and its per-call
reservations (`RedisStore` keeps them under the UTC day of the server's
clock, `TIME`, read once a minute and carried on by the worker's monotonic
clock: a worker whose clock is off spends the fleet's day, never one of its
own)"; "Concurrent runs never spend past the quota as long as a call costs
no more than its estimate."

Attack: worker B read the server's `TIME` (serving Bob), then its VM was
snapshotted; it is restored 3 days later (the threat rounds 127/128 name: "a
VM restored from a snapshot"). Linux's CLOCK_MONOTONIC (`time.monotonic`)
does not count time the system was suspended or the guest not running
(clock_gettime(2)): after the restore, `monotonic() - read` is seconds, not 3
days, so `CLOCK_READ_S` has not passed and `_today` carries the 3-day-old
`TIME` on. The test stands for the restore by letting B's read have been
stamped 3 days of monotonic time "ahead" (the store's own `time` module is
replaced; asyncio's clock is untouched). Alice, whose $2 quota worker A has
spent, then reaches B.

What happened: B reserves and charges against the day of the snapshot (its
key long expired): a second full quota for Alice. Should: the carried clock
checked against a second clock that does count the gap (the wall clock's
advance since the read, or CLOCK_BOOTTIME) and `TIME` read again when they
disagree; or the day taken from `TIME` inside the reserve script.

Both attacks are one test: B reads the server's clock (serving Bob) while its
own clock is disturbed (``stepped``: the wall clock 3 days behind, then set
right; ``restored``: the monotonic clock stamping the read 3 days "ahead", the
restore); then Alice, whose quota worker A spent, reaches B.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable

import pytest
from agentscope.message import UserMsg

import agentscope_harness.stores.redis as redis_store
from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice
from agentscope_harness.stores import RedisStore
from tests.scripted import ALICE, BOB, ScriptedModel, calls, drain, make_agent, text

pytestmark = pytest.mark.asyncio

URL = "redis://127.0.0.1:6399/1"  # tests.scripted.REDIS_URL
PRICES = {"scripted": ModelPrice(100.0, 100.0)}
QUOTA = 2.0
DAYS_3 = 3 * 86400


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    return f"found {q}"


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(store=RedisStore(URL, prefix=prefix),
                                 cost=CostPolicy(daily_quota_usd=QUOTA, prices=PRICES)),
                   load_entry_points=False, environ={})


def _model() -> ScriptedModel:
    return ScriptedModel([*[calls(("lookup", {"q": str(i)}), inp=1000, out=3000) for i in range(20)], text("done")])


def _stepped(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """B boots 3 days behind (a VM restored, NTP not yet synced); NTP steps it right."""
    behind = types.SimpleNamespace(monotonic=time.monotonic, time=lambda: time.time() - DAYS_3)
    monkeypatch.setattr(redis_store, "time", behind)
    return lambda: monkeypatch.setattr(redis_store, "time", time)


def _restored(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """B's read is stamped on a monotonic clock that, after a restore 3 days
    later, reads as if only seconds had passed (the store's own ``time``
    module is replaced; asyncio's clock is untouched)."""
    frozen = types.SimpleNamespace(monotonic=lambda: time.monotonic() + DAYS_3, time=time.time)
    monkeypatch.setattr(redis_store, "time", frozen)
    return lambda: monkeypatch.setattr(redis_store, "time", time)


@pytest.mark.parametrize("disturb", [_stepped, _restored], ids=["stepped", "restored"])
async def test_a_worker_with_a_disturbed_clock_does_not_open_a_second_quota(
        monkeypatch: pytest.MonkeyPatch, disturb: Callable[[pytest.MonkeyPatch], Callable[[], None]],
        redis_prefix: str) -> None:
    a, b = _worker(redis_prefix), _worker(redis_prefix)
    first = make_agent(_model(), [lookup], a.middlewares())
    with a.acting_for(ALICE):
        await drain(first, UserMsg("user", "research"))
    on_a = a.last_report(first)
    assert on_a.reason == "budget" and on_a.spent_usd > 0.75 * QUOTA  # Alice's quota is (nearly) spent

    settle = disturb(monkeypatch)  # B reads the server's clock (Bob's request) while its own is off
    bobs = make_agent(ScriptedModel([text("hi bob")]), [lookup], b.middlewares())
    with b.acting_for(BOB):
        await drain(bobs, UserMsg("user", "hello"))
    assert b.last_report(bobs).reason == "answered"
    settle()  # seconds later: well within CLOCK_READ_S

    second = make_agent(_model(), [lookup], b.middlewares())
    with b.acting_for(ALICE):
        await drain(second, UserMsg("user", "research more"))
    on_b = b.last_report(second)
    total = on_a.spent_usd + on_b.spent_usd
    assert total <= QUOTA + 1e-9, (
        f"Alice's daily quota is ${QUOTA:.2f}: ${on_a.spent_usd:.2f} on worker A, then ${on_b.spent_usd:.2f} "
        f"more on worker B right after its clock was disturbed ({on_b.model_calls} model calls) = ${total:.2f}"
    )

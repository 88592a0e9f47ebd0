"""What every store shares: the protocol, the day, the time bound on a call
and the pure decision rules (GCRA, breaker, quota fit) that MemoryStore and
SQLiteStore apply and RedisStore's Lua scripts mirror line for line."""

from __future__ import annotations

import asyncio
import datetime as _dt
import inspect
import math
import operator
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from ..errors import DependencyDown, being_cancelled

T = TypeVar("T")

BreakerDecision = Literal["closed", "probe", "open"]
"""``closed``: go. ``probe``: go, you are the one half-open probe; report the
outcome with ``breaker_record``. ``open``: refuse."""
BreakerState = Literal["closed", "open"]

DEFAULT_TIMEOUT_S = 2.0
MINUTE_S = 60.0

PROBE_LEASE_S = 60.0
"""How long a claimed half-open probe is held before another may be claimed
(a process that dies holding it delays recovery this long at most)."""


def positive(**settings: float) -> None:
    """A store's durations and timeouts are finite and above 0: a TTL of 0
    expires the day's spend as it is written (the quota never binds), a
    timeout of 0 or NaN fails every call; each is refused at construction,
    named (``ValueError``)."""
    for name, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0
        ):
            raise ValueError(f"{name} must be a finite number above 0, not {value!r}")


def whole(name: str, value: Any) -> int:
    """A count a store takes whole (days, seconds Redis expires keys by,
    connections), as an ``int``: an integer (``2``, ``2.0``, a NumPy integer)
    of 1 or more (at least today, for a number of days), named
    (``ValueError``) else."""
    count: int | None = None
    if isinstance(value, float) and value.is_integer():
        count = int(value)
    elif not isinstance(value, (bool, float)):
        try:
            count = operator.index(value)
        except TypeError:
            count = None
    if count is None or count < 1:
        today = " (today)" if name.endswith("_days") else ""
        raise ValueError(f"{name} must be a whole number of 1 or more{today}, not {value!r}")
    return count


def today() -> str:
    """The UTC day the spend is charged to."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")


def daily_left(quota: float, spent: float) -> float:
    """What is left of a daily quota; float residue of summed charges
    (ten charges of 0.1 leave 1e-16 of 1.0) is nothing left."""
    left = quota - spent
    return left if left > 1e-9 * max(quota, 1.0) else 0.0


def fits(quota: float, committed: float, held: float, usd: float) -> bool:
    """Whether a reservation of ``usd`` fits beside the committed spend and
    the live reservations; the same float tolerance as ``daily_left``, so
    ten reservations of 0.1 fill a quota of 1.0."""
    return committed + held + usd <= quota + 1e-9 * max(quota, 1.0)


def new_reservation_id(day: str) -> str:
    """A reservation id carries its day, so a call that settles after
    midnight is charged to the day it reserved on."""
    return f"{day}/{uuid.uuid4().hex}"


def reservation_day(reservation_id: str) -> str:
    day, sep, _ = reservation_id.partition("/")
    if not sep:
        raise ValueError(f"not a reservation id: {reservation_id!r}")
    return day


def new_lease_id() -> str:
    return uuid.uuid4().hex


def gcra(tat: float, now: float, per_min: int, cost: int) -> tuple[float, float]:
    """One GCRA step (a token bucket of ``per_min`` refilled over a minute,
    kept as one number: the theoretical arrival time ``tat``).

    Returns ``(new_tat, 0.0)`` when admitted, ``(tat, wait_s)`` when not;
    ``wait_s`` is ``inf`` for a cost above ``per_min`` (never admissible)."""
    if per_min <= 0 or cost < 0:
        raise ValueError(f"rate limit needs per_min > 0 and cost >= 0 (got {per_min}, {cost})")
    if cost > per_min:
        return tat, math.inf
    new_tat = max(tat, now) + MINUTE_S * cost / per_min
    allow_at = new_tat - MINUTE_S
    if allow_at > now:
        return tat, allow_at - now
    return new_tat, 0.0


def gcra_refund(tat: float, now: float, per_min: int, cost: float) -> float:
    """The theoretical arrival time once ``cost`` units a rate admitted are
    given back (a call that then did not run): never before ``now``, so a
    bucket never holds more than full. A negative ``cost`` takes units
    already used, from ``now`` at the earliest."""
    if cost < 0:
        return max(now, tat) - MINUTE_S * cost / per_min
    return max(now, tat - MINUTE_S * cost / per_min)


@dataclass
class Breaker:
    """A tool's shared breaker. ``state`` ``half`` means a probe is out until
    ``probe_until``; ``opened`` is when it last opened."""

    state: str = "closed"
    failures: int = 0
    opened: float = 0.0
    probe_until: float = 0.0


def breaker_allow_step(b: Breaker, now: float, cooldown_s: float,
                       probe_lease_s: float) -> BreakerDecision:
    """Decide one call and claim the probe in ``b`` (mutated) when due."""
    if b.state == "closed":
        return "closed"
    due = now >= b.opened + cooldown_s if b.state == "open" else now >= b.probe_until
    if not due:
        return "open"
    b.state, b.probe_until = "half", now + probe_lease_s
    return "probe"


def breaker_renew_step(b: Breaker, now: float, probe_lease_s: float) -> bool:
    """Hold ``b``'s half-open probe ``probe_lease_s`` more from now (mutated);
    whether it is still out (a breaker its outcome decided is left as it is)."""
    if b.state != "half":
        return False
    b.probe_until = max(b.probe_until, now + probe_lease_s)
    return True


def breaker_record_step(b: Breaker, now: float, ok: bool, failures_to_open: int,
                        probe: bool = False) -> BreakerState:
    """Record an outcome into ``b`` (mutated). An open breaker ignores late
    outcomes of calls admitted before it opened, and a half-open one every
    outcome but its probe's: only the probe closes it (a stale failure
    landing first would reopen it, and the probe's success then be ignored)."""
    if b.state == "open" or (b.state == "half" and not probe):
        return "open"
    if ok:
        b.state, b.failures = "closed", 0
        return "closed"
    b.failures += 1
    if b.state == "half" or b.failures >= failures_to_open:
        b.state, b.opened = "open", now
        return "open"
    return "closed"


def store_timeout(store: object) -> float:
    """The bound of one call to ``store``: its own ``timeout_s``, if any."""
    value = getattr(store, "timeout_s", None)
    return float(value) if isinstance(value, (int, float)) else DEFAULT_TIMEOUT_S


_timeout = getattr(asyncio, "timeout", None)


async def bounded(awaitable: Awaitable[T], what: str, timeout_s: float | None,
                  deadline: float | None = None) -> T:
    """Await a store call for at most ``timeout_s`` and not past ``deadline``
    (a ``time.monotonic()`` instant); past either it is ``DependencyDown``.

    A call that times out may still have happened on the server (it was sent);
    every such outcome over-counts (a charge), never under-counts, so the
    limits stay safe; a reservation or a lease it took is given back
    (``given_back_if_abandoned``)."""
    budget = timeout_s
    if deadline is not None:
        left = deadline - time.monotonic()
        budget = left if budget is None else min(budget, left)
    if budget is not None and budget <= 0:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise DependencyDown(what, "no time left before the deadline")
    try:
        if _timeout is None:  # pragma: no cover - Python 3.10
            return await asyncio.wait_for(awaitable, budget)
        # in this task, not another as ``wait_for`` runs it: a cancellation
        # reaches the acquisition itself (which gives back what it took), and
        # no answer is dropped between two tasks (``wait_for``, cancelled as
        # its task answered, raised and lost the lease that task returned)
        async with _timeout(budget):
            return await awaitable
    except asyncio.TimeoutError as exc:
        raise DependencyDown(what, f"no answer within {budget:.3g} s") from exc


async def store_call(store: object, call: Callable[[], Awaitable[T]], role: str, deadline: float | None) -> T:
    """``call()`` of ``store`` in its ``role`` (``spend store``, ``limits
    store``, ...), bounded by the store's ``timeout_s`` and ``deadline``. Any
    failure, the call's making too, a ``CancelledError`` the store raised
    when nobody cancelled its caller too, is ``DependencyDown`` naming the store as
    it tells itself (a built-in store's ``told``: its address, never its
    credentials; a store of yours by its class), so a report says which store
    did not answer when the bound, not the store, ended the wait."""
    try:
        return await bounded(call(), role, store_timeout(store), deadline)
    except DependencyDown as exc:
        if exc.dependency != role:  # the store's own: named by it
            raise
        raise DependencyDown(_named(store, role), exc.cause) from exc
    except asyncio.CancelledError as exc:
        if being_cancelled():  # the caller's own cancellation
            raise
        raise DependencyDown(_named(store, role), "the store's call was cancelled") from exc
    except Exception as exc:
        raise DependencyDown(_named(store, role), exc) from exc


def _named(store: object, role: str) -> str:
    told = getattr(store, "told", None)
    return f"{role} ({told if isinstance(told, str) else type(store).__name__})"


async def given_back_if_abandoned(acquire: Callable[[], Awaitable[T]],
                                  give_back: Callable[[Any], Awaitable[object]],
                                  taken: Callable[[Any], bool] = bool) -> T:
    """Await an acquisition (a lease, a reservation, a rate unit) that
    happens once its request is sent. If the caller stops waiting
    (cancelled, or out of time), the request is left to finish and what it
    took, if anything (``taken`` of its answer), is given back: a caller
    that is gone holds nothing until a TTL (a cancelled reply's run slot
    would refuse its user's next reply for ``lease_s``, its rate unit the
    next call of the minute)."""
    task = asyncio.ensure_future(acquire())
    try:
        return await asyncio.shield(task)
    except BaseException:
        task.add_done_callback(partial(_give_back_late, give_back, taken))
        raise


def unit_give_back(store: Any, key: str, per_min: int, cost: int) -> Callable[[Any], Awaitable[None]]:
    """The give-back of ``cost`` rate units taken for a caller that stopped
    waiting: only the part of their window still to run (timed from before
    the request was sent, so never more than is still held), as
    ``Fleet._release`` gives back its own: a give-back that lands late must
    not free the units another worker took since."""
    sent_at = time.monotonic()

    async def give_back(_: Any) -> None:  # only after a take: ``per_min`` was a valid limit
        left = 1.0 - (time.monotonic() - sent_at) / (60.0 * cost / per_min)
        if left > 0:
            await store.rate_refund(key, per_min, cost * left)

    return give_back


_GIVING_BACK: set[asyncio.Future[object]] = set()
"""Give-backs in flight (the loop keeps only weak references to tasks)."""


def _give_back_late(give_back: Callable[[Any], Awaitable[object]], taken: Callable[[Any], bool],
                    task: asyncio.Future[Any]) -> None:
    if task.cancelled() or task.exception() is not None or not taken(task.result()):
        return  # nothing was taken (a store that cannot tell gives back itself: ``give_back_soon``)
    give_back_soon(give_back(task.result()))


def give_back_soon(giving_back: Awaitable[object]) -> None:
    """Run a give-back in the background, its failure ignored (a store
    down now: the TTL frees what it holds, as any slot never released)."""
    returned = asyncio.ensure_future(giving_back)
    _GIVING_BACK.add(returned)
    returned.add_done_callback(_given_back)


def _given_back(returned: asyncio.Future[object]) -> None:
    _GIVING_BACK.discard(returned)
    if not returned.cancelled():
        returned.exception()


@runtime_checkable
class SpendStore(Protocol):
    """The daily spend alone: what a store of version 0.1 provides."""

    async def get_spend(self, key: str, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        """USD committed by ``key`` on ``day`` (today by default)."""
        ...

    async def add_spend(self, key: str, usd: float, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        """Add ``usd`` atomically; the new committed total."""
        ...


@runtime_checkable
class LedgerStore(SpendStore, Protocol):
    """Everything the harness shares between runs, processes and hosts.

    Every method is atomic across all users of the same backend, raises
    ``DependencyDown`` when the backend cannot answer within the store's
    ``timeout_s`` or before ``deadline`` (a ``time.monotonic()`` instant),
    and keeps nothing forever: reservations, probes and leases expire."""

    async def reserve_spend(self, key: str, usd: float, quota: float, day: str | None = None, *,
                            ttl_s: float = 300.0, deadline: float | None = None) -> str | None:
        """Hold ``usd`` of the day's ``quota`` (committed spend plus live
        reservations count); a reservation id, or None when it does not fit.
        The hold lapses after ``ttl_s`` (a crashed process frees it)."""
        ...

    async def settle_spend(self, key: str, reservation_id: str, actual_usd: float,
                           day: str | None = None, *, deadline: float | None = None) -> float:
        """Replace the hold by what was spent (charged in full, even above the
        hold or after it lapsed); the new committed total. Once per
        reservation: a settle sent again (its first answer lost, its caller
        cancelled) charges nothing more. ``day`` defaults to the
        reservation's day."""
        ...

    async def breaker_allow(self, tool: str, cooldown_s: float, *, probe_lease_s: float = 60.0,
                            deadline: float | None = None) -> BreakerDecision:
        """``closed`` (go), ``probe`` (go: the one half-open probe across all
        processes, held for ``probe_lease_s``) or ``open`` (refuse)."""
        ...

    async def breaker_record(self, tool: str, ok: bool, failures_to_open: int, *,
                             deadline: float | None = None, probe: bool = False) -> BreakerState:
        """Record a call's outcome; the new state. The probe's success closes
        a half-open breaker and its failure re-opens it for another cooldown
        (``probe``: this outcome is the half-open probe's; any other outcome
        leaves a half-open breaker as it is); ``failures_to_open``
        consecutive failures open a closed one."""
        ...

    async def rate_acquire(self, key: str, per_min: int, cost: int = 1, *,
                           deadline: float | None = None) -> float:
        """Admit ``cost`` units (1 per call, or tokens) against ``per_min``:
        0.0 when admitted, else the seconds until it would be (not admitted;
        ``inf`` when ``cost > per_min``)."""
        ...

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        """One of ``max_in_flight`` slots for ``lease_s`` seconds: a lease id,
        or None when all are taken."""
        ...

    async def lease_release(self, key: str, lease_id: str, *,
                            deadline: float | None = None) -> None:
        """Free a slot (a lapsed or unknown lease is a no-op)."""
        ...


@runtime_checkable
class ProbeRenewal(Protocol):
    """A store whose half-open probe can be held past its lease while its
    call runs (the three stores can): without it a probe slower than its
    lease lets a second probe in."""

    async def breaker_renew(self, tool: str, probe_lease_s: float, *,
                            deadline: float | None = None) -> bool:
        """Hold the tool's half-open probe ``probe_lease_s`` seconds more from
        now; False when no probe is out (its outcome decided, or it lapsed and
        another was taken: held then too, as the one probe out)."""
        ...


@runtime_checkable
class RateRefund(Protocol):
    """A store that can give back what a rate limit admitted for a call that
    did not run (refused by a later gate, parked for a human): the three
    stores do; without it such units lapse within the minute."""

    async def rate_refund(self, key: str, per_min: int, cost: float = 1, *,
                          deadline: float | None = None) -> None:
        """Give back ``cost`` units taken from ``key`` (see ``gcra_refund``;
        a fraction: what is left of a unit's window). A negative ``cost``
        takes units whatever the bucket holds: ones already used (tokens a
        provider billed past a call's estimate)."""
        ...


PARK_TTL_S = 7 * 86400
"""How long a parked reply's record is kept: answered later, it resumes as
a reply parked elsewhere would without one (unverified)."""


@runtime_checkable
class ParkRecords(Protocol):
    """A store that keeps what a reply parked on a human was (who parked
    it, what its run had counted and spent, the calls the human was shown),
    so that a resume in another process is held to it. Optional: without
    it such a resume is judged by every gate, unverified."""

    async def park_put(self, reply_id: str, record: str, *, ttl_s: float = PARK_TTL_S,
                       deadline: float | None = None) -> None:
        """Keep ``record`` (JSON text) for ``reply_id`` ``ttl_s`` seconds,
        replacing any earlier one."""
        ...

    async def park_get(self, reply_id: str, *, deadline: float | None = None) -> str | None:
        """The record kept for ``reply_id``; ``None``: none (or it expired)."""
        ...

    async def park_claim(self, park_id: str, *, ttl_s: float = PARK_TTL_S,
                         deadline: float | None = None) -> bool:
        """Claim the one answer to the park ``park_id``: True for the first
        claim, False for every other, at once or later (atomic across
        processes: one approval resumes one run)."""
        ...


@runtime_checkable
class LeaseRenewal(Protocol):
    """A store whose leases can be held past ``lease_s``: what
    ``concurrency_limits`` need besides ``LedgerStore`` (a slot is renewed
    while its run or call lasts)."""

    async def lease_renew(self, key: str, lease_id: str, lease_s: float, *,
                          deadline: float | None = None) -> bool:
        """Hold a slot ``lease_s`` seconds more from now; False when the lease
        has lapsed or is unknown (it is not taken again: the slot may be
        someone else's by now)."""
        ...

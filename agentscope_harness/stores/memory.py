"""The in-process store: one process, nothing to wait for, bounded memory."""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable

from ._base import (
    PARK_TTL_S,
    Breaker,
    BreakerDecision,
    BreakerState,
    breaker_allow_step,
    breaker_record_step,
    breaker_renew_step,
    fits,
    gcra,
    gcra_refund,
    new_lease_id,
    new_reservation_id,
    positive,
    reservation_day,
    today,
    whole,
)


class MemoryStore:
    """In-process store (the default); lost with the process.

    Every method finishes without awaiting, so it is atomic on the event loop
    and needs no timeout (``deadline`` is accepted and has nothing to bound).
    Memory stays bounded: spend days older than ``retention_days`` (today
    counts as one), lapsed reservations and leases, and rate entries whose
    bucket is full again are dropped by a sweep at most every
    ``sweep_every_s`` seconds (amortised O(1) per call); a breaker that closes
    clean is dropped at once.

    Bytes held per entry, measured with ``tracemalloc`` on CPython 3.11 over
    10,000 principals keyed like ``acme/u-00042`` (the key string included;
    ``python -m benchmarks --only fleet`` re-measures them):

    ==============================================  =====
    entry                                           bytes
    ==============================================  =====
    daily spend, per principal per retained day       107
    live spend reservation (first of a principal)     561
    rate limit, per key while its bucket refills      106
    concurrency lease (first of a key)                369
    breaker, per tool while open or failing           186
    ==============================================  =====
    """

    def __init__(self, retention_days: int = 2, *, clock: Callable[[], float] = time.monotonic,
                 sweep_every_s: float = 60.0) -> None:
        retention_days = whole("retention_days", retention_days)
        positive(sweep_every_s=sweep_every_s)
        self.retention_days = retention_days
        self.sweep_every_s = sweep_every_s
        self._clock = clock
        self._spend: dict[str, dict[str, float]] = {}  # day -> key -> usd
        self._holds: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}  # -> id -> (usd, until)
        self._settled: dict[str, set[str]] = {}  # day -> reservation ids settled
        self._breakers: dict[str, Breaker] = {}
        self._rates: dict[str, float] = {}  # key -> theoretical arrival time
        self._leases: dict[str, dict[str, float]] = {}  # key -> id -> until
        self._parked: dict[str, tuple[str, float]] = {}  # reply id -> (record, until)
        self._claimed: dict[str, float] = {}  # park id -> until
        self._next_sweep = clock() + sweep_every_s

    # ------------------------------------------------------------ spend

    async def get_spend(self, key: str, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        return self._spend.get(day or today(), {}).get(key, 0.0)

    async def add_spend(self, key: str, usd: float, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        return self._charge(key, usd, day or today())

    def _charge(self, key: str, usd: float, day: str) -> float:
        self._tidy()
        per_day = self._spend.setdefault(day, {})
        per_day[key] = per_day.get(key, 0.0) + usd
        return per_day[key]

    async def reserve_spend(self, key: str, usd: float, quota: float, day: str | None = None, *,
                            ttl_s: float = 300.0, deadline: float | None = None) -> str | None:
        self._tidy()
        day = day or today()
        now = self._clock()
        holds = self._holds.setdefault((day, key), {})
        for rid in [rid for rid, (_, until) in holds.items() if until <= now]:
            del holds[rid]
        held = sum(amount for amount, _ in holds.values())
        if not fits(quota, self._spend.get(day, {}).get(key, 0.0), held, usd):
            if not holds:
                del self._holds[(day, key)]
            return None
        rid = new_reservation_id(day)
        holds[rid] = (usd, now + ttl_s)
        return rid

    async def settle_spend(self, key: str, reservation_id: str, actual_usd: float,
                           day: str | None = None, *, deadline: float | None = None) -> float:
        day = day or reservation_day(reservation_id)
        holds = self._holds.get((day, key))
        if holds is not None:
            holds.pop(reservation_id, None)
            if not holds:
                del self._holds[(day, key)]
        settled = self._settled.setdefault(day, set())
        if reservation_id in settled:  # sent again: charged once
            return self._spend.get(day, {}).get(key, 0.0)
        settled.add(reservation_id)
        return self._charge(key, actual_usd, day)

    # ---------------------------------------------------------- breakers

    async def breaker_allow(self, tool: str, cooldown_s: float, *, probe_lease_s: float = 60.0,
                            deadline: float | None = None) -> BreakerDecision:
        breaker = self._breakers.get(tool)
        if breaker is None:
            return "closed"
        return breaker_allow_step(breaker, self._clock(), cooldown_s, probe_lease_s)

    async def breaker_renew(self, tool: str, probe_lease_s: float, *, deadline: float | None = None) -> bool:
        breaker = self._breakers.get(tool)
        return breaker is not None and breaker_renew_step(breaker, self._clock(), probe_lease_s)

    async def breaker_record(self, tool: str, ok: bool, failures_to_open: int, *,
                             deadline: float | None = None, probe: bool = False) -> BreakerState:
        self._tidy()
        breaker = self._breakers.setdefault(tool, Breaker())
        state = breaker_record_step(breaker, self._clock(), ok, failures_to_open, probe)
        if breaker.state == "closed" and breaker.failures == 0:
            del self._breakers[tool]
        return state

    # ------------------------------------------------------- rate limits

    async def rate_acquire(self, key: str, per_min: int, cost: int = 1, *,
                           deadline: float | None = None) -> float:
        self._tidy()
        now = self._clock()
        tat, wait = gcra(self._rates.get(key, now), now, per_min, cost)
        if wait == 0.0:
            self._rates[key] = tat
        return wait

    async def rate_refund(self, key: str, per_min: int, cost: float = 1, *,
                          deadline: float | None = None) -> None:
        now = self._clock()
        tat = self._rates.get(key, now if cost < 0 else None)  # units taken count from now at the earliest
        if tat is not None:
            self._rates[key] = gcra_refund(tat, now, per_min, cost)

    # ------------------------------------------------------------ leases

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        self._tidy()
        now = self._clock()
        leases = self._leases.setdefault(key, {})
        for lid in [lid for lid, until in leases.items() if until <= now]:
            del leases[lid]
        if len(leases) >= max_in_flight:
            return None
        lid = new_lease_id()
        leases[lid] = now + lease_s
        return lid

    async def lease_renew(self, key: str, lease_id: str, lease_s: float, *,
                          deadline: float | None = None) -> bool:
        now = self._clock()
        leases = self._leases.get(key)
        if leases is None or leases.get(lease_id, now) <= now:
            return False
        leases[lease_id] = now + lease_s
        return True

    async def lease_release(self, key: str, lease_id: str, *,
                            deadline: float | None = None) -> None:
        leases = self._leases.get(key)
        if leases is not None:
            leases.pop(lease_id, None)
            if not leases:
                del self._leases[key]

    # ------------------------------------------------------------- upkeep

    # ------------------------------------------------------------ parked replies

    async def park_put(self, reply_id: str, record: str, *, ttl_s: float = PARK_TTL_S,
                       deadline: float | None = None) -> None:
        self._tidy()
        self._parked[reply_id] = (record, self._clock() + ttl_s)

    async def park_get(self, reply_id: str, *, deadline: float | None = None) -> str | None:
        kept = self._parked.get(reply_id)
        return kept[0] if kept is not None and kept[1] > self._clock() else None

    async def park_claim(self, park_id: str, *, ttl_s: float = PARK_TTL_S,
                         deadline: float | None = None) -> bool:
        self._tidy()
        now = self._clock()
        if self._claimed.get(park_id, now) > now:
            return False
        self._claimed[park_id] = now + ttl_s
        return True

    def _tidy(self) -> None:
        """Sweep when due: amortised O(1) per call, and what is live stays."""
        now = self._clock()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_every_s
        first_kept = (_dt.datetime.now(_dt.timezone.utc).date()
                      - _dt.timedelta(days=self.retention_days - 1)).isoformat()
        for day in [d for d in self._spend if d < first_kept]:
            del self._spend[day]
        for day in [d for d in self._settled if d < first_kept]:
            del self._settled[day]
        for slot, holds in list(self._holds.items()):
            for rid in [rid for rid, (_, until) in holds.items() if until <= now]:
                del holds[rid]
            if slot[0] < first_kept or not holds:
                del self._holds[slot]
        for reply_id in [r for r, (_, until) in self._parked.items() if until <= now]:
            del self._parked[reply_id]
        for park_id in [p for p, until in self._claimed.items() if until <= now]:
            del self._claimed[park_id]
        for key, leases in list(self._leases.items()):
            for lid in [lid for lid, until in leases.items() if until <= now]:
                del leases[lid]
            if not leases:
                del self._leases[key]
        for key in [k for k, tat in self._rates.items() if tat <= now]:
            del self._rates[key]  # fully refilled: the same as absent

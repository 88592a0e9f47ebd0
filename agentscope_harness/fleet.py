"""The harness's side of the shared store: what makes N processes behind
one store behave as one harness.

- Circuit breakers live in the store (``breaker_allow``/``breaker_record``);
  exactly one call across the fleet gets the half-open probe. When the store
  cannot answer, the process-local breaker decides (a ``breaker_fallback``
  decision names it) and the store is asked again a second later: recovery
  needs no restart.
- Rate limits (GCRA in the store) and concurrency leases (TTL slots) for tool
  calls are taken at the tool's gate and released when its result is shaped,
  when the call is refused after all, or when its run closes.
- Runs in flight per principal/tenant hold a lease from open to close.
- Every lease held is renewed four times per ``lease_s``, so a slot lasts
  as long as its run or call does, however long that is; a crashed process's
  slots lapse within ``lease_s``. A parked run gives its run slots back (a
  run waiting for a human is not in flight); it takes them again on resume.
- Before each model call its cost is reserved against the principal's daily
  quota and settled with the actual cost after: concurrent runs never spend
  past the quota (as long as a call costs no more than its estimate).

Budgets and limits fail closed (``dependency_down``) when the store is down
or slow; breakers fail over to local state.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from agentscope.model import AnthropicChatModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential, wait_random

from .context import fallback, found_so_far, time_ran_out
from .errors import DependencyDown
from .lazy import made
from .registry import HookRejectSignal
from .stores import (
    PROBE_LEASE_S,
    LedgerStore,
    MemoryStore,
    ParkRecords,
    ProbeRenewal,
    RateRefund,
    give_back_soon,
    store_call,
)

if TYPE_CHECKING:
    from .config import ConcurrencyLimit, HarnessConfig, RateLimit
    from .context import ToolCallContext, ToolResultContext
    from .run_state import RunState

T = TypeVar("T")

log = logging.getLogger("agentscope_harness")

CHARS_PER_TOKEN = 4
DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""A model call's output bound when neither the model's ``parameters.max_tokens``
nor ``CostPolicy.max_output_tokens`` gives one."""
PASSED_ON_S = 0.001
"""How long a probe due is held when a run that failed with the tool met it
(it may not probe): next to nothing, so the next call anywhere claims it."""
STORE_RETRY_S = 1.0
"""After a breaker store failure, how long the local breaker decides before
the store is asked again."""
RESERVATION_MIN_TTL_S = 600.0
SETTLE_ATTEMPTS = 3
"""Tries of one settle before it is kept, retried in the background and
before the principal's next reservation here."""
SETTLE_RETRY_S = 1.0
"""The first wait of the background retry of settles the store did not
take; it doubles up to ``SETTLE_RETRY_MAX_S``."""
SETTLE_RETRY_MAX_S = 30.0
UNIT_KEYS_KEPT = 4096
"""Rate keys whose units' ends a worker keeps before it forgets the passed ones."""
RENEWALS = 4
"""Renewals per ``lease_s``, on a fixed schedule: a lease survives a store
(or an event loop) that cannot answer for up to half of its ``lease_s``."""


@dataclass
class Breaker:
    """This process's view of one tool's breaker: what the calls it ran saw.
    It decides alone when the store does not hold breakers or cannot answer."""

    failures: int = 0
    opened_at: float | None = None
    half_open_probe: bool = False


_UNJUDGED = object()
"""A limit the live fleet did not judge for the call (refused before it)."""


@dataclass
class _Limited(Exception):
    """A limit refused: the sentinel code and what the model or user is told."""

    code: str
    text: str


@dataclass
class ModelAdmission:
    """The outcome of the checks before one model call: go (holding a spend
    reservation, maybe), or the fallback answer to give instead."""

    reservation: str | None = None
    answer: str | None = None
    too_late: bool = False
    """The deadline came first, cutting a store wait: the call is not made,
    and the run ends at its deadline (not at a store outage)."""


@dataclass(frozen=True, slots=True)
class _Lease:
    """One slot held in the store, and how long each renewal holds it."""

    key: str
    id: str
    seconds: float
    max_in_flight: int
    """The limit's: a lease the store lost is taken again within it."""


@dataclass
class _ModelUnits:
    """The rate units one model call took: calls and tokens."""

    calls: list[_Taken] = field(default_factory=list)
    tokens: list[_Taken] = field(default_factory=list)


@dataclass(frozen=True)
class _Taken:
    """Units a tool's rate limit admitted for one call: given back if the
    call does not run."""

    key: str
    per_min: int
    cost: int
    ends: float
    """When they stop counting (``time.monotonic``), as far as this worker
    knows when it takes them (``Fleet._take_unit``): never later than they
    really do."""
    given_back: float
    """The seconds this worker had given back on ``key`` when it took them
    (``_KeyUnits.given_back``): what it gives back later moves them earlier."""

    @property
    def width(self) -> float:
        """The seconds of the bucket they fill (it drains 60 s / ``per_min`` a unit)."""
        return 60.0 * self.cost / self.per_min

    def still_held(self, given_back: float) -> float:
        """The units that still count now, ``given_back`` the seconds this
        worker has given back on the key so far: a unit whose window has
        passed counts for nothing (given back whole, it would free a later
        caller's), one partly past for what is left of it. Every refund
        since it was taken moves its window earlier (one of a unit taken
        after it need not: reckoned early, never late)."""
        ends = self.ends - max(0.0, given_back - self.given_back)
        return self.cost * min(1.0, max(0.0, (ends - time.monotonic()) / self.width))


@dataclass(slots=True)
class _KeyUnits:
    """The units this worker took on one rate key: when the last stops
    counting, and the seconds of them it has given back."""

    ends: float
    given_back: float = 0.0


@dataclass
class _Holds:
    """Leases one run holds: its own (runs in flight) and its calls'; and
    the rate units its calls took and have not yet run on."""

    owner: weakref.ref[RunState]
    run: list[_Lease] = field(default_factory=list)
    calls: dict[str, list[_Lease]] = field(default_factory=dict)
    rates: dict[str, list[_Taken]] = field(default_factory=dict)

    def leases(self) -> list[_Lease]:
        """Every lease held: the run's own, then its calls'."""
        return self.run + [lease for leases in self.calls.values() for lease in leases]

    def renewable(self) -> list[_Lease]:
        """Every lease of a live run not parked for a human (a parked run's
        report is set until it resumes), of one whose end a middleware before
        the harness's holds (``RunState.reopen``: it may ask for another round), or
        of a settled one whose nested runs still run (``Fleet.close_run``,
        ``park_run`` kept its run slots for them)."""
        owner = self.owner()
        swallowed = owner is not None and owner.reopen is not None and owner.reopen.swallowed()
        if owner is None or (owner.report is not None and not swallowed and not owner.live_nested):
            return []
        return self.leases()

    def drop(self, lease: _Lease, taken_again: _Lease | None = None) -> bool:
        """Forget a lease that lapsed (holding ``taken_again`` in its place,
        when its slot was taken again); False when it was no longer held
        (released while its renewal was on its way)."""
        for leases in (self.run, *self.calls.values()):
            if lease in leases:
                leases.remove(lease)
                if taken_again is not None:
                    leases.append(taken_again)
                return True
        return False


class Fleet:
    """Shared breakers, rate and concurrency limits and spend reservations
    of one Harness, through its store."""

    def __init__(
        self, config: HarnessConfig, store: Any, record: Callable[..., Any], scrubbed: Callable[[str], str],
    ) -> None:
        self.config, self.store, self.record = config, store, record
        self.scrubbed = scrubbed
        """How a log line states a key or an error (a principal's key may be an email)."""
        self.ledger = isinstance(store, LedgerStore)
        self.in_process = isinstance(store, MemoryStore)
        self.breakers: dict[str, Breaker] = {}
        self._store_retry_at = 0.0
        self._spare_probes: dict[str, float] = {}
        self._spare_takers: dict[tuple[str, str], str] = {}
        """The calls (run id, call id) judged to take a tool's spare probe at
        admission: one not admitted gives it back (``_give_back_spare``)."""
        self._seen_open: set[str] = set()
        self._units: dict[str, _KeyUnits] = {}
        """Per rate key, this worker's units there (see ``_take_unit``)."""
        self._units_swept = UNIT_KEYS_KEPT
        """How many keys ``_units`` may hold before lapsed ones are swept."""
        self._probes: dict[tuple[str, str], tuple[str, bool]] = {}
        """The calls (run id, call id) that are their tool's half-open probe:
        the tool, and whether the probe is the store's (else this process's)."""
        self._probe_holders: dict[tuple[str, str], asyncio.Task[None]] = {}
        """Per store probe out, the task holding it in the store while its call runs."""
        self._holds: dict[str, _Holds] = {}
        self._model_units: dict[tuple[str, str | None], _ModelUnits] = {}
        """Per model call in flight, ``(run id, side)`` (``side``: ``None``
        for the run's own call, an id for each call a middleware makes
        beside it), the rate units it took: given back whole if the call is
        not made (``not_made``), the token units beyond what it was billed
        once it answers (``tokens_used``)."""
        self._unsettled: dict[str, list[tuple[str | None, float]]] = {}
        """Settlements the store did not take, by principal key: retried in
        the background until it takes them (another worker may serve the
        principal next), and made before that principal's next reservation
        here (money spent is never dropped while the process lives)."""
        self._settler: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._giving_back: dict[str, set[asyncio.Task[None]]] = {}
        """The background give-backs of each lease or rate key (``_released_here``)."""
        self._given_by: dict[str, set[asyncio.Task[None]]] = {}
        """The background give-backs of each run's calls, waited for when it closes."""
        self._renewer: asyncio.Task[None] | None = None
        self.waits = config.mode != "shadow"
        """``False``: a rate limit's wait is not made, only judged (in shadow
        mode, which delays nothing, and a candidate policy's: it must never
        delay the live call)."""
        self.renew_every_s = min((limit.lease_s for limit in config.concurrency_limits), default=0.0) / RENEWALS
        """How often held leases are renewed (``RENEWALS`` times per shortest lease)."""
        self.follows_live = False
        """A candidate policy's fleet: a tool limit the live fleet judged for
        the call is judged as it was (``_verdict``)."""
        self.tool_rates: dict[str, list[RateLimit]] = {}
        self.model_rates: list[RateLimit] = []
        self.tool_leases: dict[str, list[ConcurrencyLimit]] = {}
        self.run_leases: list[ConcurrencyLimit] = []
        for rate in config.rate_limits:
            if rate.tool is None:
                self.model_rates.append(rate)
            else:
                self.tool_rates.setdefault(rate.tool, []).append(rate)
        for limit in config.concurrency_limits:
            if limit.tool is None:
                self.run_leases.append(limit)
            else:
                self.tool_leases.setdefault(limit.tool, []).append(limit)

    async def _call(self, call: Callable[[], Awaitable[T]], what: str, deadline: float | None) -> T:
        """One store call, ``call()``, bounded; any failure, its making too (a
        store of yours whose method raises at once), is ``DependencyDown``. A
        ``MemoryStore`` call never waits: awaited as is, it costs no task and
        never yields to the loop (parallel calls are judged in their order)."""
        if self.in_process:
            return await call()
        return await store_call(self.store, call, what, deadline)

    async def claim_parked_budget(self, claim: str, deadline: float | None) -> bool:
        """Whether this reply continues the parked budget ``claim`` names:
        True for the first claim fleet-wide, False for every other (another
        reply took it: the state carrying it was loaded twice). A store that
        keeps no park records, or a budget parked before claims were kept
        (``""``), has nothing to claim; one that does not answer raises
        ``DependencyDown``."""
        store = self.store
        if not claim or not isinstance(store, ParkRecords):
            return True
        return bool(await self._call(partial(store.park_claim, f"budget:{claim}", deadline=deadline),
                                     "claim a parked budget", deadline))

    # ------------------------------------------------------------ breakers

    async def breaker_gate(self, ctx: ToolCallContext) -> None:
        """Refuse a call whose breaker is open; the half-open probe is
        claimed from the store here (an await) but used at admission: a call
        a later gate refuses, or one parked for a human, gives it back
        (``_give_back_spare``), so no probe is held where no call runs."""
        tool, now = ctx.tool.name, time.monotonic()
        failed_here = bool((made(ctx.run.root, "breaker_failures") or {}).get(tool))
        if self._spare_probes.get(tool, 0.0) > now and not failed_here:
            self._spare_takers[(ctx.run.run_id, ctx.tool.id)] = tool
            ctx.admit(lambda: self._use_probe(ctx))
            return
        if self.ledger and now >= self._store_retry_at:
            try:
                decision = await self._call(
                    partial(
                        self.store.breaker_allow, tool, ctx.config.breaker_cooldown_s, deadline=ctx.run.deadline,
                        # a run that failed with the tool may not probe it: a probe due is
                        # claimed for no time, so the next call anywhere claims it
                        probe_lease_s=PASSED_ON_S if failed_here else PROBE_LEASE_S,
                    ),
                    "breaker store", ctx.run.deadline,
                )
            except DependencyDown as exc:
                self._store_retry_at = now + STORE_RETRY_S
                ctx.decide("breaker_fallback", code="dependency_down",
                           detail=f"{exc}; this process's breaker decides")
            else:
                if decision == "open":
                    raise _unavailable(tool, "it is failing")
                if decision == "probe" and failed_here:
                    _not_a_failed_run(ctx)
                if decision == "probe":
                    self._spare_probes[tool] = now + PROBE_LEASE_S
                    self._spare_takers[(ctx.run.run_id, ctx.tool.id)] = tool
                    ctx.admit(lambda: self._use_probe(ctx))
                return
        self._local_gate(ctx)

    def _use_probe(self, ctx: ToolCallContext) -> None:
        """At admission: this call is the fleet's half-open probe."""
        tool = ctx.tool.name
        self._spare_takers.pop((ctx.run.run_id, ctx.tool.id), None)
        _not_a_failed_run(ctx)
        until = self._spare_probes.pop(tool, 0.0)
        if until <= time.monotonic():
            raise _unavailable(tool, "another call is checking whether it is back")
        key = (ctx.run.run_id, ctx.tool.id)
        self._probes[key] = (tool, True)
        if isinstance(self.store, ProbeRenewal):
            self._probe_holders[key] = self._in_background(self._hold_probe(self.store, tool))
        ctx.decide("half_open", detail="probe (shared breaker)")

    async def _hold_probe(self, store: ProbeRenewal, tool: str) -> None:
        """Keep the store's probe this process runs out for as long as its
        call runs (``PROBE_LEASE_S`` at a time, renewed four times a lease):
        a probe slower than its lease would let another probe in. Ended
        when the probe's outcome is recorded or it is abandoned (and with
        the process: then the lease lapses, and another worker probes)."""
        while True:
            await asyncio.sleep(PROBE_LEASE_S / 4)
            try:
                if not await self._call(partial(store.breaker_renew, tool, PROBE_LEASE_S), "breaker store", None):
                    return  # decided, or taken again elsewhere after it lapsed
            except DependencyDown:
                continue  # the next renewal may reach it before the lease ends

    def _local_gate(self, ctx: ToolCallContext) -> None:
        breaker = self.breakers.get(ctx.tool.name)
        if breaker is None or breaker.opened_at is None:
            return
        waited = time.monotonic() - breaker.opened_at
        if waited >= ctx.config.breaker_cooldown_s and not breaker.half_open_probe:
            ctx.admit(lambda: self._claim_local_probe(ctx, breaker, waited))
            return
        raise _unavailable(ctx.tool.name, f"it failed {breaker.failures} times in a row")

    def _claim_local_probe(self, ctx: ToolCallContext, breaker: Breaker, waited: float) -> None:
        """This process's half-open probe goes to one call that will run:
        claimed at admission, after every other gate passed."""
        if breaker.half_open_probe:
            raise _unavailable(ctx.tool.name, "another call is checking whether it is back")
        _not_a_failed_run(ctx)
        breaker.half_open_probe = True
        self._probes[(ctx.run.run_id, ctx.tool.id)] = (ctx.tool.name, False)
        ctx.decide("half_open", detail=f"probe after {waited:.1f}s")

    def is_probe(self, ctx: ToolResultContext) -> bool:
        """Whether this call is its tool's half-open probe."""
        return (ctx.run.run_id, ctx.tool.id) in self._probes

    async def breaker_record(self, ctx: ToolResultContext, ok: bool) -> None:
        """Feed this process's breaker and the shared one with a call's
        outcome (successes, and dependency-class failures only)."""
        tool = ctx.tool.name
        claimed = self._probe_over((ctx.run.run_id, ctx.tool.id))
        probe = claimed is not None
        if ok:  # the run's own count is of consecutive failures
            (made(ctx.run.root, "breaker_failures") or {}).pop(tool, None)
        elif self._failed_again(ctx) and not probe:
            return
        local = self._record_local(tool, ok)
        shared: str | None = None
        if self.ledger and time.monotonic() >= self._store_retry_at:
            try:
                shared = await self._call(
                    partial(self.store.breaker_record, tool, ok, ctx.config.breaker_failures,
                            deadline=ctx.run.deadline, probe=claimed is not None and claimed[1]),
                    "breaker store", ctx.run.deadline,
                )
            except DependencyDown as exc:
                self._store_retry_at = time.monotonic() + STORE_RETRY_S
                ctx.decide("breaker_fallback", code="dependency_down",
                           detail=f"{exc}; outcome kept in this process's breaker only")
        if shared is None:
            if local is not None:
                ctx.decide(*local)
            return
        if shared == "closed" and (probe or tool in self._seen_open):
            self._seen_open.discard(tool)
            ctx.decide("breaker_closed")
        elif shared == "open" and not ok and (probe or tool not in self._seen_open):
            self._seen_open.add(tool)
            ctx.decide("breaker_open", code="dependency_down",
                       detail="probe failed" if probe else "failures reached the limit")

    def _failed_again(self, ctx: ToolResultContext) -> bool:
        """Whether the run already counted a failure of this tool towards
        its breaker: this one counts towards the run's own (at
        ``breaker_failures`` the run goes without the tool, as if it had
        reported its dependency down)."""
        tool, failures = ctx.tool.name, ctx.run.root.breaker_failures
        failures[tool] += 1
        if failures[tool] == 1:
            return False
        if failures[tool] >= self.config.breaker_failures:
            ctx.run.dependency_went_down(tool)
        return True

    def _record_local(self, tool: str, ok: bool) -> tuple[str, ...] | None:
        """Update the local breaker; the decision its transition calls for."""
        breakers = self.breakers
        if ok:
            breaker = breakers.pop(tool, None)
            if breaker is not None and breaker.opened_at is not None:
                return ("breaker_closed",)
            return None
        breaker = breakers.setdefault(tool, Breaker())
        breaker.failures += 1
        if breaker.half_open_probe or (
            breaker.opened_at is None and breaker.failures >= self.config.breaker_failures
        ):
            breaker.opened_at = time.monotonic()
            breaker.half_open_probe = False
            return ("breaker_open", "dependency_down", f"{breaker.failures} failures")
        return None

    # ------------------------------------------------------------ tool limits

    async def acquire_tool(self, ctx: ToolCallContext) -> None:
        """The tool's rate limits (wait up to ``wait_s``, within the deadline
        and the hook timeout) and concurrency slots; refuse with
        ``rate_limited``, ``concurrency_limited`` or ``dependency_down``."""
        tool = ctx.tool.name
        rates, limits = self.tool_rates.get(tool, ()), self.tool_leases.get(tool, ())
        if not rates and not limits:
            return
        run = ctx.run
        deadline = run.deadline
        await self._released_here(itertools.chain(
            (_rate_key(rate, run, "calls") for rate in rates), (_lease_key(limit, run) for limit in limits),
        ), deadline)
        hook_s = self.config.hook_timeout_s
        wait_until = None if hook_s is None else time.monotonic() + 0.8 * hook_s
        held: list[_Lease] = []
        taken: list[_Taken] = []
        try:
            for rate in rates:
                assert rate.calls_per_min is not None  # a tool limit counts calls
                key = _rate_key(rate, run, "calls")
                # its size and how long it may wait (its own, and within the hook timeout): a
                # candidate's limit equal in all three takes the live verdict
                with self._verdict(ctx, f"{key}/{rate.calls_per_min}/{rate.wait_s}/{hook_s}"):
                    if await self._rate(rate, key, rate.calls_per_min, 1, deadline, wait_until, tool):
                        taken.append(self._take_unit(key, rate.calls_per_min, 1))
            for limit in limits:
                key = _lease_key(limit, run)
                with self._verdict(ctx, f"{key}/{limit.max_in_flight}"):
                    lease = await self._call(
                        partial(self.store.lease_acquire, key, limit.max_in_flight, limit.lease_s, deadline=deadline),
                        "limits store", deadline,
                    )
                    if lease is None:
                        raise _Limited("concurrency_limited", (
                            f"{tool} is busy: {limit.max_in_flight} calls of it are already running "
                            f"({_whose(limit.scope)}). Try again shortly, or answer with what you have."
                        ))
                    held.append(_Lease(key, lease, limit.lease_s, limit.max_in_flight))
        except BaseException as exc:  # cancelled too: what was taken so far is given back
            self._release_later(held, taken)
            if isinstance(exc, _Limited):
                raise HookRejectSignal(exc.text, code=exc.code, hard=True) from None
            if not isinstance(exc, DependencyDown):
                raise
            run.dependency_went_down(tool)  # the run goes without the tool, as at an open breaker
            raise HookRejectSignal(
                f"{tool} cannot be checked against its limits: {exc}. Do not retry; tell the user.",
                code="dependency_down", hard=True,
            ) from None
        if taken:
            self._holds_of(run).rates[ctx.tool.id] = taken
        if held:
            self._holds_of(run).calls[ctx.tool.id] = held
            self._keep_renewing()

    @contextmanager
    def _verdict(self, ctx: ToolCallContext, limit: str) -> Iterator[None]:
        """One tool limit judged for ``ctx``'s call (``limit``: its store key,
        size and a rate's wait bounds). The live fleet records its verdict in
        ``ctx.limits_met``; a candidate's (``follows_live``) takes the live
        verdict on the same limit over its private store's: the same traffic,
        judged in the order the live store admitted it (concurrent calls
        finish the live gates, and reach the candidate, in another order).
        Its private units are still taken where they can be, for the calls
        the live store never judged."""
        met = ctx.limits_met
        live = met.get(limit, _UNJUDGED) if self.follows_live and met is not None else _UNJUDGED
        try:
            yield
        except _Limited as refused:
            if live is None:  # the live store took it: allowed (its private unit not taken)
                return
            if not self.follows_live:
                ctx.limits_met = {**(met or {}), limit: refused}
            raise
        if isinstance(live, _Limited):  # refused live: refused alike (what it took goes back)
            raise live
        if not self.follows_live:
            ctx.limits_met = {**(met or {}), limit: None}

    async def _rate(self, rate: RateLimit, key: str, per_min: int, cost: int,
                    deadline: float | None, wait_until: float | None, what: str) -> bool:
        """Take ``cost`` from a rate limit, waiting while the wait fits in
        ``wait_s``, the deadline and ``wait_until``; else ``_Limited``.
        Whether it was taken (not when the wait is only judged: ``waits``)."""
        waited = 0.0
        while True:
            wait = await self._call(
                partial(self.store.rate_acquire, key, per_min, cost, deadline=deadline), "limits store", deadline,
            )
            if wait <= 0:
                return True
            end = time.monotonic() + wait
            if (math.isinf(wait) or waited + wait > rate.wait_s
                    or (deadline is not None and end >= deadline)
                    or (wait_until is not None and end >= wait_until)):
                when = "never: the call is larger than the limit" if math.isinf(wait) else (
                    f"in {math.ceil(wait)} s")
                raise _Limited("rate_limited", (
                    f"{what} is rate limited ({per_min} per minute, {_whose(rate.scope)}); "
                    f"it can run again {when}. Do not retry before then; tell the user if it cannot wait."
                ))
            if not self.waits:  # judged only: it would run after this wait, having taken nothing yet
                return False
            await asyncio.sleep(wait)
            waited += wait

    def _take_unit(self, key: str, per_min: int, cost: int) -> _Taken:
        """Units just taken from ``key``: they stop counting after those this
        worker took there before (the bucket drains in order). Other
        workers' units only make the real end later, so a refund reckoned
        from this never frees another caller's unit."""
        now = time.monotonic()
        units = self._units.get(key)
        if units is None:
            units = self._units[key] = _KeyUnits(now)
        units.ends = max(units.ends, now) + 60.0 * cost / per_min
        if len(self._units) > self._units_swept:  # keys whose units all passed are forgotten
            self._units = {k: u for k, u in self._units.items() if u.ends > now}
            # the next sweep once as many keys again are kept: a sweep that frees nothing
            # (every key still live) is not made again at the next call (amortised O(1))
            self._units_swept = max(UNIT_KEYS_KEPT, 2 * len(self._units))
        return _Taken(key, per_min, cost, units.ends, units.given_back)

    def running(self, run: RunState, call_id: str) -> None:
        """The call starts: the rate units it took are spent (whatever then
        becomes of it; one admitted and dropped before it started gives
        them back when its run closes)."""
        holds = self._holds.get(run.run_id)
        if holds is not None:
            holds.rates.pop(call_id, None)

    def release_call(
        self, run: RunState, call_id: str, *, ran: bool = True, until: asyncio.Task | None = None,
    ) -> None:
        """A call's slots go back (freed in the background: never awaited):
        its result was shaped, or it was refused, parked or not made after
        taking them; ``until``: when that task ends (a tool cut at the
        deadline and still stopping: its slots are the run's no more, not
        renewed, so held at most ``lease_s``). A call that did not run
        (``ran=False``) gives back the rate units it took too, and the
        half-open probe it claimed."""
        if not ran and self._probes:
            self._abandon_probes(run.run_id, call_id)
        if self._spare_takers:
            self._give_back_spare(run.run_id, call_id)
        holds = self._holds.get(run.run_id)
        if holds is None:
            return
        held, taken = holds.calls.pop(call_id, []), holds.rates.pop(call_id, [])
        if not (holds.run or holds.calls or holds.rates):  # nothing left to hold for the run
            del self._holds[run.run_id]
        if until is not None and held:
            until.add_done_callback(lambda _: self._release_later(held))
            return
        task = self._release_later(held, taken if not ran else [])
        if task is not None:
            _track(self._given_by, (run.run_id,), task)

    def _abandon_probes(self, run_id: str, call_id: str | None = None) -> None:
        """A half-open probe that never ran to an outcome (not made, dropped,
        its run closed first) proves nothing: its tool's breaker opens again
        for a cooldown, here and in the store, so the next call probes then
        (else the store would keep the probe out for ``PROBE_LEASE_S``)."""
        for key in [k for k in self._probes if k[0] == run_id and call_id in (None, k[1])]:
            tool, shared = self._probes[key]
            self._probe_over(key)
            self._record_local(tool, False)
            if shared:
                self._in_background(self._reopen(tool))

    def _probe_over(self, key: tuple[str, str]) -> tuple[str, bool] | None:
        """The probe of call ``key`` is over (its outcome came, or none will):
        no longer held in the store; what it was, if it was one."""
        holder = self._probe_holders.pop(key, None)
        if holder is not None:
            holder.cancel()
        return self._probes.pop(key, None)

    def shaped(self, run: RunState, call_id: str) -> None:
        """The call's result was shaped: a half-open probe whose outcome no
        hook recorded (one placed before the breaker's refused the result)
        is over, its breaker open again for a cooldown: never held in the
        store while the run goes on."""
        if self._probes:
            self._abandon_probes(run.run_id, call_id)

    def _give_back_spare(self, run_id: str, call_id: str | None = None) -> None:
        """A call judged to take its tool's spare probe and never admitted
        (refused by a later gate, parked for a human, cut short): the probe,
        still unused, proves nothing and blocks every other worker's call of
        the tool while this process keeps it. Unless another call judged to
        take it is still being judged, its breaker opens again for a
        cooldown, here and in the store, so the next call anywhere probes
        then; a spare past its lease is the store's no more (another worker
        may have probed and closed the breaker since): dropped only."""
        for key in [k for k in self._spare_takers if k[0] == run_id and call_id in (None, k[1])]:
            tool = self._spare_takers.pop(key)
            if tool in self._spare_takers.values():
                continue  # another call judged to take it may still: it stays for that one
            until = self._spare_probes.pop(tool, None)
            if until is not None and until > time.monotonic():  # lapsed: the store's is no longer ours to end
                self._record_local(tool, False)
                self._in_background(self._reopen(tool))

    async def _reopen(self, tool: str) -> None:
        try:
            await self._call(partial(self.store.breaker_record, tool, False, self.config.breaker_failures, probe=True),
                             "breaker store", None)
        except DependencyDown:
            pass  # the store's probe lapses at PROBE_LEASE_S

    def _release_later(self, held: list[_Lease], taken: Sequence[_Taken] = ()) -> asyncio.Task[None] | None:
        if not (held or taken):
            return None
        task = self._in_background(self._release(held, taken))
        _track(self._giving_back, {lease.key for lease in held} | {t.key for t in taken}, task)
        return task

    def _in_background(self, step: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a store step on this loop without awaiting it (kept until done)."""
        task = asyncio.get_running_loop().create_task(step)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _released_here(self, keys: Iterable[str], deadline: float | None) -> None:
        """What this worker gave back of ``keys`` is back before it takes
        them again: a release runs in the background, and a call made right
        after the last one ended would else find that call's slot still
        held. Only those keys' give-backs are waited for (another
        principal's slow one is not this run's), and not past ``deadline``.
        ``keys`` is read only when something is being given back (the
        common case costs no key)."""
        if not self._giving_back:
            return
        loop = asyncio.get_running_loop()
        pending = {task for key in keys for task in self._giving_back.get(key, ()) if task.get_loop() is loop}
        if pending:
            await asyncio.wait(pending, timeout=None if deadline is None else max(deadline - time.monotonic(), 0))

    async def _release(self, held: list[_Lease], taken: Sequence[_Taken] = ()) -> None:
        """Free leases and give back rate units; what the store cannot take
        back lapses (a lease at its TTL, units within the minute)."""
        store = self.store
        gives: list[Callable[[], Awaitable[None]]] = [
            partial(store.lease_release, lease.key, lease.id) for lease in held
        ]
        if taken and isinstance(store, RateRefund):
            for t in taken:
                mine = self._units.get(t.key)  # forgotten: all its units passed
                units = t.still_held(mine.given_back if mine is not None else 0.0)
                if units > 0:
                    gives.append(partial(store.rate_refund, t.key, t.per_min, units))
                    if mine is not None:  # the units after it in the bucket end that much sooner
                        seconds = t.width * units / t.cost
                        mine.given_back += seconds
                        mine.ends = max(time.monotonic(), mine.ends - seconds)
        if self.in_process or len(gives) < 2:
            for give in gives:
                await self._give(give)
        else:  # together: a slow store holds them one bound, not one each
            await asyncio.gather(*map(self._give, gives))

    async def _give(self, give: Callable[[], Awaitable[None]]) -> None:
        try:
            await self._call(give, "limits store", None)
        except DependencyDown:
            pass

    def _holds_of(self, run: RunState) -> _Holds:
        holds = self._holds.get(run.run_id)
        if holds is None:
            holds = self._holds[run.run_id] = _Holds(run.handle)
        return holds

    def _keep_renewing(self) -> None:
        """Start the renewer on this loop unless it runs already."""
        renewer = self._renewer
        if renewer is not None and not renewer.done() and renewer.get_loop() is asyncio.get_running_loop():
            return
        self._renewer = asyncio.get_running_loop().create_task(self._renew_held())

    async def _renew_held(self) -> None:
        """Renew every renewable lease each ``renew_every_s``, on a fixed
        schedule (the time a round takes does not push the next one back),
        until none is held; a later acquisition or resume starts it again.
        A lease the store no longer holds (it lapsed while the store was
        down or the loop blocked, or the store lost it: a Redis restarted
        without persistence) is taken again if its limit has room, so a
        limit is whole again within a renewal; a slot someone else holds by
        now is not taken from them (the run goes on past the limit, logged)."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due = max(due + self.renew_every_s, loop.time())
            await asyncio.sleep(due - loop.time())
            held = [(holds, lease) for holds in list(self._holds.values()) for lease in holds.renewable()]
            if not held:
                return
            failures: list[DependencyDown] = []
            for holds, lease in held:
                if await self._renewed(lease, failures):
                    continue
                again = await self._taken_again(lease, failures)
                if not any(h is holds for h in self._holds.values()) or not holds.drop(lease, again):
                    if again is not None:  # released (its run closed) while it was taken again: not held
                        give_back_soon(self.store.lease_release(again.key, again.id))
                elif again is None:
                    log.warning("harness lease %s of %s lapsed before it was renewed, its limit full",
                                lease.id, self.scrubbed(lease.key))
            if failures:
                log.warning("harness could not renew %d of %d leases: %s",
                            len(failures), len(held), self.scrubbed(str(failures[-1])))

    async def _renewed(self, lease: _Lease, failures: list[DependencyDown]) -> bool:
        """Renew one lease; False once it has lapsed (a store that cannot
        answer is noted in ``failures`` and asked again next round)."""
        try:
            return bool(await self._call(
                partial(self.store.lease_renew, lease.key, lease.id, lease.seconds), "limits store", None,
            ))
        except DependencyDown as exc:
            failures.append(exc)
            return True

    async def _taken_again(self, lease: _Lease, failures: list[DependencyDown]) -> _Lease | None:
        """A lost lease's slot taken again, when its limit has room."""
        try:
            taken = await self._call(
                partial(self.store.lease_acquire, lease.key, lease.max_in_flight, lease.seconds), "limits store", None,
            )
        except DependencyDown as exc:
            failures.append(exc)
            return None
        return None if taken is None else _Lease(lease.key, taken, lease.seconds, lease.max_in_flight)

    # ------------------------------------------------------------ runs

    async def open_run(self, run: RunState, root_here: bool = True) -> None:
        """A root run takes one slot of each run concurrency limit, at open
        and again at a resume (``park_run`` gave them back: the slot may be
        another run's by now); over a limit (or with the store down) it ends
        at once, incomplete, with the fallback answer at its first step (a
        resumed run's parked call does not run). A nested run opened or
        resumed in a root no longer in flight (settled or parked: a
        background sub-agent of a lead that ended) takes the root's slots
        again, kept until its root's last nested run ends (``root_here``:
        the root is this Harness's run; another Harness's root's slots are
        its own fleet's to keep)."""
        if not self.run_leases:
            return
        root = run.root
        if run.parent is None:
            await self._take_run_slots(run, run)
        elif root.report is not None and root_here:
            # armed first: a retake cut short still gives back what it took
            root.after_nested = partial(self._release_kept, root.run_id)
            await self._take_run_slots(run, root)

    async def park_run(self, run: RunState) -> None:
        """A run parked for a human is not in flight: its run slots go back
        now, so its resume takes one afresh wherever it lands (a slot kept
        here was one another worker's resume could neither renew nor free)."""
        holds = self._holds.get(run.run_id)
        if holds is not None and holds.run:
            if run.live_nested:  # a nested run of it still runs: its work in flight keeps them, renewed
                run.after_nested = partial(self._release_kept, run.run_id)
            else:
                leases, holds.run = holds.run, []
                await self._release(leases)
        await self._calls_given_back(run)

    async def _take_run_slots(self, run: RunState, holder: RunState) -> None:
        """``holder``'s run slots, for ``run`` (the run stopped if they cannot
        be had). Slots this worker gave back in the background are back first:
        a resume right after its lead's kept slot went would find it held."""
        await self._released_here((_lease_key(limit, holder) for limit in self.run_leases), run.deadline)
        holds = self._holds_of(holder)
        for limit in self.run_leases:
            key = _lease_key(limit, holder)
            if any(held.key == key for held in holds.run):
                continue
            try:
                lease = await self._call(
                    partial(self.store.lease_acquire, key, limit.max_in_flight, limit.lease_s, deadline=run.deadline),
                    "limits store", run.deadline,
                )
            except DependencyDown as exc:
                if run.past_deadline():  # the deadline bounds every store wait: it came first
                    self._out_of_time(run, f"the run slot was not had in time ({exc})")
                else:
                    self.stop(run, "dependency_down", "dependency_down", str(exc))
                return
            if any(held.key == key for held in holds.run):  # taken for ``holder`` meanwhile (two of its
                if lease is not None:  # nested runs re-taking its slot at once): one is enough
                    give_back_soon(self.store.lease_release(key, lease))
                continue
            if lease is None:
                self.stop(run, "concurrency_limited", "concurrency_limited",
                          f"{limit.max_in_flight} runs already in flight ({_whose(limit.scope)})")
                return
            holds.run.append(_Lease(key, lease, limit.lease_s, limit.max_in_flight))
            self._keep_renewing()

    async def close_run(self, run: RunState) -> None:
        """Free every slot the run still holds (its own, and calls never
        shaped: cancelled, abandoned, cut short), and give back the rate
        units of calls admitted that never started and the probes of calls
        that came to no outcome."""
        if self._probes:
            self._abandon_probes(run.run_id)
        if self._spare_takers:
            self._give_back_spare(run.run_id)
        if self._unsettled:
            self._settle_later(0.0)
        for key in [key for key in self._model_units if key[0] == run.run_id]:
            del self._model_units[key]
        holds = self._holds.pop(run.run_id, None)
        if holds is not None and holds.run and run.live_nested:
            # a nested run still running (a sub-agent a tool started in the background) is
            # the run's work in flight: its run slots stay taken, renewed, until the last ends
            self._holds[run.run_id] = _Holds(holds.owner, run=holds.run)
            run.after_nested = partial(self._release_kept, run.run_id)
            holds.run = []
        self._stop_renewing_if_idle()
        if holds is not None:
            await self._release(holds.leases(), [t for taken in holds.rates.values() for t in taken])
        await self._calls_given_back(run)

    async def _calls_given_back(self, run: RunState) -> None:
        """The run's calls' slots went back in the background as each ended:
        back in the store before its reply returns (closed or parked), so
        the caller's next call on another worker finds them free. A store
        that does not answer holds the reply one store call's bound at most
        (a call's give-backs are made together, each bounded)."""
        loop = asyncio.get_running_loop()
        giving = [task for task in self._given_by.pop(run.run_id, ()) if task.get_loop() is loop]
        if giving:
            await asyncio.wait(giving)

    def _release_kept(self, run_id: str) -> None:
        """The last nested run of a closed or parked run ended: the run
        slots it kept go (not those of a run resumed since: its own again)."""
        holds = self._holds.get(run_id)
        owner = holds.owner() if holds is not None else None
        if holds is None or (owner is not None and owner.report is None):
            return
        leases, holds.run = holds.run, []
        if not holds.leases() and not holds.rates:
            del self._holds[run_id]
        self._stop_renewing_if_idle()
        self._release_later(leases)

    def _stop_renewing_if_idle(self) -> None:
        renewer = self._renewer
        if not self._holds and renewer is not None:  # nothing left to renew
            if renewer.get_loop() is asyncio.get_running_loop():
                renewer.cancel()
            self._renewer = None

    def stop(self, run: RunState, reason: str, code: str, detail: str) -> None:
        """End a run from outside a hook, as ``ctx.stop`` would: incomplete,
        with the fallback answer at its next step (in shadow mode the report
        ends so, as enforcing would end it, and the run goes on: ``_refuse``)."""
        run.facts.stop(reason, fallback(self.config, reason) + found_so_far(run))
        self.record(run, "fleet", "pre_think", "stop", code=code, detail=f"{reason}: {detail}")

    def _out_of_time(self, run: RunState, what: str) -> None:
        """The run ends at its deadline, as the watchdog ends it (README: a
        store wait the deadline cuts is no store outage: `deadline`)."""
        time_ran_out(run, self.config)
        self.record(run, "liveness_watchdog", "pre_think", "stop", detail=f"deadline: {what}", enforced=True)

    # ------------------------------------------------------------ model calls

    async def before_model_call(self, run: RunState, model: Any, messages: list[Any],
                                tools: list[Any], side: str | None = None) -> ModelAdmission:
        """Model-call and token rate limits, then the call's reservation
        against the daily quota. A refusal stops the run (``rate_limited``,
        ``budget`` or ``dependency_down``) and gives its fallback answer; a
        ``side`` call (a middleware's own, under that id) is refused alone."""
        if self._unsettled:  # a loop that ended took their retry with it: now, on this one
            self._settle_later(0.0)
        root = run.root
        cost = self.config.cost
        if root.principal is None and cost is not None and cost.daily_quota_usd is not None:
            return self._refuse(run, "budget", "quota_exhausted",  # nobody to keep the quota for: fail closed
                                "daily_quota_usd is kept per principal and none is bound", side is None)
        reserve = self._reservable(root, model)
        if not self.model_rates and reserve is None:
            return ModelAdmission()
        input_tokens = estimate_input_tokens(messages, tools)
        output_tokens = max_output_tokens(model, self.config)
        units = _ModelUnits()  # a call that fails keeps them: they lapse
        if self.model_rates:
            self._model_units[run.run_id, side] = units
        try:
            for rate in self.model_rates:
                if rate.calls_per_min is not None:
                    key = _rate_key(rate, root, "calls")
                    if await self._rate(rate, key, rate.calls_per_min, 1, run.deadline, None, "The model"):
                        units.calls.append(self._take_unit(key, rate.calls_per_min, 1))
                if rate.tokens_per_min is not None:
                    key, worst = _rate_key(rate, root, "tokens"), input_tokens + output_tokens
                    if await self._rate(rate, key, rate.tokens_per_min, worst, run.deadline, None, "The model"):
                        units.tokens.append(self._take_unit(key, rate.tokens_per_min, worst))
            if reserve is None:
                return ModelAdmission()
            quota, price = reserve
            usd = price.usd(input_tokens, output_tokens)
            assert root.principal is not None
            if self._unsettled:
                await self._settle_pending(root.principal.key, run.deadline)
            rid = await self._call(
                partial(self.store.reserve_spend, root.principal.key, usd, quota, ttl_s=self._hold_ttl(),
                                         deadline=run.deadline),
                "spend store", run.deadline,
            )
        except _Limited as exc:
            await self.not_made(run, side=side)
            return self._refuse(run, "rate_limited", "rate_limited", exc.text, side is None)
        except DependencyDown as exc:
            await self.not_made(run, side=side)
            if run.past_deadline():  # the deadline bounds every store wait: it came first
                return ModelAdmission(too_late=True)
            root.store_error = str(exc)
            return self._refuse(run, "dependency_down", "dependency_down", str(exc), side is None)
        except BaseException:  # cancelled while waiting: nothing was made
            await asyncio.shield(self.not_made(run, side=side))
            raise
        if rid is None:
            await self.not_made(run, side=side)
            return self._refuse(run, "budget", "quota_exhausted",
                                f"a call estimated at ${usd:.6f} does not fit in the daily quota", side is None)
        return ModelAdmission(reservation=rid)

    async def not_made(self, run: RunState, reservation: str | None = None, side: str | None = None) -> None:
        """The model call admitted (or being admitted) is not made: its
        reservation settles at nothing and its rate units go back whole."""
        if reservation is not None:
            await self.settle(run, reservation, 0.0)
        units = self._model_units.pop((run.run_id, side), None)
        if units is not None and (units.calls or units.tokens):
            await self._release([], [*units.calls, *units.tokens])

    async def tokens_used(self, run: RunState, tokens: int, side: str | None = None) -> None:
        """The model call in flight was billed ``tokens``: the token units
        it took beyond them (its output's worst case) go back, and those it
        was billed past them are taken, before the reply goes on (another
        worker reads the bucket at once), so a ``tokens_per_min`` limit
        counts the tokens used."""
        units = self._model_units.pop((run.run_id, side), None)
        taken = units.tokens if units is not None else []
        if not taken or not isinstance(self.store, RateRefund):
            return
        unused = [_Taken(t.key, t.per_min, t.cost - tokens, t.ends, t.given_back)
                  for t in taken if t.cost > tokens]  # the block's tail: its last units
        if unused:
            await self._release([], unused)
        for t in taken:
            if tokens > t.cost:  # billed past its worst case (text that tokenizes densely): taken too
                self._take_unit(t.key, t.per_min, tokens - t.cost)
                await self._take_past(t.key, t.per_min, tokens - t.cost)

    async def _take_past(self, key: str, per_min: int, units: int) -> None:
        """Units already used, taken whatever the bucket holds (a refund of
        minus ``units``); a store that cannot take them lets them go."""
        store = self.store
        assert isinstance(store, RateRefund)
        try:
            await self._call(partial(store.rate_refund, key, per_min, -units), "limits store", None)
        except DependencyDown:
            pass

    def _refuse(self, run: RunState, reason: str, code: str, detail: str, stops: bool) -> ModelAdmission:
        shadow = self.config.mode == "shadow"
        if not stops:  # that call alone: the run goes on (its next call meets the same limit)
            self.record(run, "fleet", "on_model_call", "refuse", code=code, detail=f"{reason}: {detail}")
            return ModelAdmission() if shadow else ModelAdmission(answer=detail)
        self.stop(run, reason, code, detail)
        if shadow:
            return ModelAdmission()
        return ModelAdmission(answer=run.facts.stop_text)

    def _reservable(self, root: RunState, model: Any) -> tuple[float, Any] | None:
        """``(quota, price)`` when this call's cost must be reserved first."""
        cost = self.config.cost
        if cost is None or cost.daily_quota_usd is None or root.principal is None:
            return None
        if not self.ledger or root.daily_spent_usd is None:
            return None
        price = cost.price_of(str(getattr(model, "model", "")))
        return None if price is None else (cost.daily_quota_usd, price)

    def _hold_ttl(self) -> float:
        deadline_s = self.config.deadline_s or 0.0
        return max(RESERVATION_MIN_TTL_S, deadline_s + 60.0)

    async def settle(self, run: RunState, reservation: str | None, usd: float) -> None:
        """Charge a call's cost to the principal's daily spend: replace its
        reservation by what it cost (0 for a call that failed or was
        cancelled) or, with none (a store keeping the daily spend alone; an
        attempt timed out before it answered), add it. Bounded by the store
        timeout only, not the deadline: money spent is charged even after the
        deadline. One the store does not take is kept and made later (a
        settle once; an add whose answer was lost may count twice: never none)."""
        root, cost = run.root, self.config.cost
        assert root.principal is not None and cost is not None and cost.daily_quota_usd is not None
        key = root.principal.key
        try:
            total = await (self._settled(key, reservation, usd) if reservation is not None
                           else self._call(partial(self.store.add_spend, key, usd), "spend store", None))
        except BaseException as exc:  # the store down, or the settle cancelled: kept, made later (once)
            self._unsettled.setdefault(key, []).append((reservation, usd))
            self._settle_later()
            if not isinstance(exc, DependencyDown):
                raise
            root.store_error = str(exc)
            self.record(run, "budget_router", "on_model_call", "error", code="dependency_down",
                        detail=f"daily spend not charged yet (retried until the store takes it): {exc}")
            return
        root.stored_today(usd, total)

    async def _settled(self, key: str, reservation: str, usd: float) -> float:
        """The settle, retried over a short blip (``SETTLE_ATTEMPTS``). A
        retry after a settle whose answer was lost charges nothing more: a
        store settles a reservation once."""
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(SETTLE_ATTEMPTS), retry=retry_if_exception_type(DependencyDown),
            wait=wait_exponential(multiplier=0.05, max=0.5) + wait_random(0, 0.05), reraise=True,
        ):
            with attempt:
                return await self._call(partial(self.store.settle_spend, key, reservation, usd), "spend store", None)
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    def _settle_later(self, wait: float = SETTLE_RETRY_S) -> None:
        """Start the background retry of kept settles on this loop, first
        after ``wait``, unless it runs here (not among the give-backs: a
        reservation never waits for it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a settle closed outside any loop: the next loop's first call retries it
            return
        settler = self._settler
        if settler is None or settler.done() or settler.get_loop() is not loop:
            self._settler = loop.create_task(self._settle_until_taken(wait))

    async def _settle_until_taken(self, wait: float) -> None:
        while self._unsettled:
            await asyncio.sleep(wait)
            for key in list(self._unsettled):
                try:
                    await self._settle_pending(key, None)
                except DependencyDown:
                    break  # the store is still down: wait longer
            wait = min(wait * 2, SETTLE_RETRY_MAX_S)

    async def _settle_pending(self, key: str, deadline: float | None) -> None:
        """Settlements that failed earlier, before a new reservation of the
        same principal (``DependencyDown``: still not taken, kept)."""
        pending = self._unsettled.pop(key, None)
        while pending:
            reservation, usd = pending[0]
            try:
                await self._call(partial(self.store.add_spend, key, usd) if reservation is None
                                 else partial(self.store.settle_spend, key, reservation, usd),
                                 "spend store", deadline)
            except BaseException:  # not taken (the store down, the step cancelled): kept
                self._unsettled.setdefault(key, [])[:0] = pending
                raise
            pending.pop(0)


def _track(index: dict[str, set[asyncio.Task[None]]], keys: Iterable[str], task: asyncio.Task[None]) -> None:
    """``task`` in ``index`` under each of ``keys`` until it is done (a key
    with no task left is dropped)."""
    keys = tuple(keys)
    for key in keys:
        index.setdefault(key, set()).add(task)
    task.add_done_callback(partial(_untrack, index, keys))


def _untrack(index: dict[str, set[asyncio.Task[None]]], keys: tuple[str, ...], task: asyncio.Task[None]) -> None:
    for key in keys:
        tasks = index.get(key)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del index[key]


def estimate_input_tokens(messages: list[Any], tools: list[Any]) -> int:
    """Characters of the messages (role, name, content as JSON) and of the
    tools' JSON schemas, over 4: the reservation's input-token estimate."""
    import json

    chars = 0
    for msg in messages:
        dump = getattr(msg, "model_dump_json", None)
        chars += len(dump(include={"role", "name", "content"}) if dump is not None else str(msg))
    chars += len(json.dumps(tools, default=str)) if tools else 0
    return chars // CHARS_PER_TOKEN + 1


ANTHROPIC_MAX_TOKENS = 8192
"""The ``max_tokens`` AgentScope's Anthropic model sends when its parameters
set none."""


def output_bound(model: Any) -> int | None:
    """The most output tokens one call of ``model`` is billed: the
    ``max_tokens`` it sends (its parameters', else the one AgentScope's
    Anthropic model sends by itself), raised as that model raises it to fit
    a thinking budget; ``None`` when it sends none. The one reading of it:
    a call's estimate, the daily quota's reservation and the token rate's
    worst case all bound a call by it."""
    bound = _whole(getattr(getattr(model, "parameters", None), "max_tokens", None))
    extra = getattr(model, "extra_body", None)  # sent as is, over the parameters' (OpenAI-style models)
    if isinstance(extra, Mapping):
        bound = max([bound, *(_whole(extra.get(key)) for key in _OUTPUT_CAPS)], key=lambda b: b or 0)
    if bound is None:
        if not isinstance(model, AnthropicChatModel):
            return None
        bound = ANTHROPIC_MAX_TOKENS
    return _with_thinking(model, bound)


_OUTPUT_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
"""The names an output cap goes by in a request body a model sends as given."""


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _with_thinking(model: Any, max_tokens: int) -> int:
    """The ``max_tokens`` the model will send: AgentScope's Anthropic model
    raises it to fit its thinking budget (``_build_thinking_config``)."""
    expand = getattr(model, "_build_thinking_config", None)
    if not callable(expand):
        return max_tokens
    try:
        return max(max_tokens, int(expand(max_tokens)[1]))
    except Exception:  # a model class of its own with that name: its bound is what it says
        return max_tokens


def max_output_tokens(model: Any, config: HarnessConfig) -> int:
    """The output bound of one call: the model's (``output_bound``), else
    ``CostPolicy.max_output_tokens`` (a run's output cap bounds each of its
    calls), capped at, or else, ``DEFAULT_MAX_OUTPUT_TOKENS``."""
    bound = output_bound(model)
    if bound is not None:
        return bound
    cost = config.cost
    if cost is not None and cost.max_output_tokens is not None:
        return min(cost.max_output_tokens, DEFAULT_MAX_OUTPUT_TOKENS)
    return DEFAULT_MAX_OUTPUT_TOKENS


def _who(scope: str, run: RunState) -> str:
    principal = run.root.principal
    if scope == "principal":
        return principal.key if principal is not None else "-"  # no principal's key has no "/"
    if scope == "tenant":  # the key's own tenant part: escaped as the key escapes it ("-" for none)
        return principal.key.partition("/")[0] if principal is not None else "-"
    return "*"


def _rate_key(rate: RateLimit, run: RunState, unit: str) -> str:
    # a tool's name is the user's (one named ``model``, or holding ``:``): tagged and escaped
    what = "model" if rate.tool is None else f"tool={_escaped(rate.tool)}"
    return f"rate:{what}:{unit}:{rate.scope}:{_who(rate.scope, run)}"


def _lease_key(limit: ConcurrencyLimit, run: RunState) -> str:
    what = f"calls:{_escaped(limit.tool)}" if limit.tool is not None else "runs"
    return f"{what}:{limit.scope}:{_who(limit.scope, run)}"


def _escaped(name: str) -> str:
    return name.replace("%", "%25").replace(":", "%3A")


def _whose(scope: str) -> str:
    return {"principal": "for this user", "tenant": "for this organisation"}.get(scope, "for everyone")


def _not_a_failed_run(ctx: ToolCallContext) -> None:
    """The half-open probe never goes to a run that already failed with the
    tool (its sub-agents included): one caller's calls that fail on their
    own arguments would otherwise reopen the breaker at every cooldown. The
    probe is left for another run."""
    if ctx.run.root.breaker_failures.get(ctx.tool.name):
        raise _unavailable(ctx.tool.name, "it failed in this task; another task checks whether it is back")


def _unavailable(tool: str, why: str) -> HookRejectSignal:
    return HookRejectSignal(
        f"{tool} is unavailable ({why}). Do not retry; tell the user.", code="dependency_down",
    )


__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "Breaker",
    "Fleet",
    "ModelAdmission",
    "estimate_input_tokens",
    "max_output_tokens",
]

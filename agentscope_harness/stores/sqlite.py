"""The SQLite store: one host, many processes, one file."""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import DependencyDown
from ._base import (
    DEFAULT_TIMEOUT_S,
    PARK_TTL_S,
    Breaker,
    BreakerDecision,
    BreakerState,
    bounded,
    breaker_allow_step,
    breaker_record_step,
    breaker_renew_step,
    fits,
    gcra,
    gcra_refund,
    given_back_if_abandoned,
    new_lease_id,
    new_reservation_id,
    positive,
    reservation_day,
    today,
    unit_give_back,
    whole,
)

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS harness_spend (
  key TEXT NOT NULL, day TEXT NOT NULL, usd REAL NOT NULL, PRIMARY KEY (key, day));
CREATE TABLE IF NOT EXISTS harness_holds (
  id TEXT PRIMARY KEY, key TEXT NOT NULL, day TEXT NOT NULL, usd REAL NOT NULL,
  until REAL NOT NULL);
CREATE INDEX IF NOT EXISTS harness_holds_key ON harness_holds (key, day);
CREATE TABLE IF NOT EXISTS harness_settled (id TEXT PRIMARY KEY, day TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS harness_breakers (
  tool TEXT PRIMARY KEY, state TEXT NOT NULL, failures INTEGER NOT NULL,
  opened REAL NOT NULL, probe_until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS harness_rates (key TEXT PRIMARY KEY, tat REAL NOT NULL);
CREATE TABLE IF NOT EXISTS harness_leases (
  id TEXT PRIMARY KEY, key TEXT NOT NULL, until REAL NOT NULL);
CREATE INDEX IF NOT EXISTS harness_leases_key ON harness_leases (key, until);
CREATE TABLE IF NOT EXISTS harness_parked (
  reply_id TEXT PRIMARY KEY, record TEXT NOT NULL, until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS harness_park_claims (park_id TEXT PRIMARY KEY, until REAL NOT NULL);
"""


class SQLiteStore:
    """SQLite file store, safe across processes on one host.

    WAL journal; every write is one ``BEGIN IMMEDIATE`` transaction, so the
    read-decide-write of a reservation, probe, rate step or lease is
    serialised across processes. Blocking calls run in a thread
    (``asyncio.to_thread``) bounded by ``timeout_s`` and the caller's
    ``deadline``; SQLite's own lock wait is ``timeout_s`` too, so a thread
    left behind by a timed-out call ends soon after. Such a thread may still
    get the lock before its own wait ends and complete the write the caller
    was told failed: a spend is then recorded (it was spent, the safe side)
    and a reservation or a lease given back (``given_back_if_abandoned``). The clock is the host's
    wall clock (``time.time``), the same for every process on the host.
    It keeps what ``MemoryStore`` keeps: spend days older than
    ``retention_days`` (today included), lapsed holds and leases, and rate
    entries whose bucket is full again are deleted by a sweep, due at most
    every ``sweep_every_s`` seconds in each process and made in a write's
    own transaction. Closed breakers are at most one row per tool."""

    def __init__(self, path: str, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                 clock: Callable[[], float] = time.time, retention_days: int = 2,
                 sweep_every_s: float = 60.0) -> None:
        retention_days = whole("retention_days", retention_days)
        positive(timeout_s=timeout_s, sweep_every_s=sweep_every_s)
        if not isinstance(path, (str, os.PathLike)) or str(path) in ("", ":memory:") or "mode=memory" in str(path):
            # a connection is opened per call: each would meet a new, empty database
            raise ValueError(f"path must name a database file shared by every call, not {path!r}")
        if str(path).startswith("file:") and "?" in str(path):
            # SQLite reads a URI's parameters: nolock, immutable, a vfs or mode=ro would turn
            # off the locking that keeps a limit exact across processes
            raise ValueError(f"path must name a database file without URI parameters, not {path!r}")
        self.path = path
        self.timeout_s = timeout_s
        self.retention_days = retention_days
        self.sweep_every_s = sweep_every_s
        self._clock = clock
        self._next_sweep = clock() + sweep_every_s
        self.told = f"SQLite store {path}"
        """How this store is named wherever it is told (a report, a log)."""
        try:
            self._make_schema()
            shared = self._read(lambda conn: conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'harness_spend'").fetchone())
        except sqlite3.Error as exc:
            raise DependencyDown(self.told, exc) from exc
        if shared is None:  # a database the next call does not meet (an in-memory URI, a private VFS)
            raise ValueError(f"path must name a database file shared by every call, not {path!r}")

    def _make_schema(self) -> None:
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
        finally:
            conn.close()

    def _on_a_new_file(self, fn: Callable[[], T]) -> T:
        """``fn``; made once more on a file removed under this process (SQLite
        makes it anew, empty: its schema is made again), as a Redis restarted
        empty is used again: the day's spend starts again, nothing waits for
        a restart."""
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        self._make_schema()
        return fn()

    def _connect(self) -> sqlite3.Connection:
        # A connection per call: a file that disappears is met at once (the next
        # call makes it anew), not a handle that keeps writing to an unlinked inode.
        return sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connect()
        try:
            return fn(conn)
        finally:
            conn.close()

    def _write(self, fn: Callable[[sqlite3.Connection, float], T]) -> T:
        """Run ``fn(conn, now)`` in one ``BEGIN IMMEDIATE`` transaction; the
        clock is read once the write lock is held, so decisions happen in
        clock order across processes."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            now = self._clock()
            result = fn(conn, now)
            if now >= self._next_sweep:
                self._next_sweep = now + self.sweep_every_s
                self._sweep(conn, now)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def _sweep(self, conn: sqlite3.Connection, now: float) -> None:
        first_kept = (_dt.datetime.now(_dt.timezone.utc).date()
                      - _dt.timedelta(days=self.retention_days - 1)).isoformat()
        conn.execute("DELETE FROM harness_spend WHERE day<?", (first_kept,))
        conn.execute("DELETE FROM harness_holds WHERE until<=? OR day<?", (now, first_kept))
        conn.execute("DELETE FROM harness_settled WHERE day<?", (first_kept,))
        conn.execute("DELETE FROM harness_leases WHERE until<=?", (now,))
        conn.execute("DELETE FROM harness_rates WHERE tat<=?", (now,))  # full again: as absent
        conn.execute("DELETE FROM harness_parked WHERE until<=?", (now,))
        conn.execute("DELETE FROM harness_park_claims WHERE until<=?", (now,))

    async def _run(self, fn: Callable[[], T], deadline: float | None,
                   give_back: Callable[[Any], Awaitable[object]] | None = None,
                   taken: Callable[[Any], bool] = bool) -> T:
        """``fn`` in a thread, bounded; ``give_back``: an acquisition's
        (its thread goes on when the caller stops waiting; ``taken`` of its
        answer: whether it took something to give back)."""
        async def call() -> T:
            try:
                return await asyncio.to_thread(self._on_a_new_file, fn)
            except sqlite3.Error as exc:
                raise DependencyDown(self.told, exc) from exc

        work = call() if give_back is None else given_back_if_abandoned(call, give_back, taken)
        return await bounded(work, self.told, self.timeout_s, deadline)

    # ------------------------------------------------------------ spend

    async def get_spend(self, key: str, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        day = day or today()
        return await self._run(lambda: self._read(lambda c: _spent(c, key, day)), deadline)

    async def add_spend(self, key: str, usd: float, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        day = day or today()
        return await self._run(lambda: self._write(lambda c, _: _charge(c, key, day, usd)), deadline)

    async def park_put(self, reply_id: str, record: str, *, ttl_s: float = PARK_TTL_S,
                       deadline: float | None = None) -> None:
        def put(conn: sqlite3.Connection, now: float) -> None:
            conn.execute("INSERT OR REPLACE INTO harness_parked VALUES (?, ?, ?)", (reply_id, record, now + ttl_s))
        await self._run(lambda: self._write(put), deadline)

    async def park_get(self, reply_id: str, *, deadline: float | None = None) -> str | None:
        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT record FROM harness_parked WHERE reply_id=? AND until>?",
                               (reply_id, self._clock())).fetchone()
            return None if row is None else str(row[0])
        return await self._run(lambda: self._read(get), deadline)

    async def park_claim(self, park_id: str, *, ttl_s: float = PARK_TTL_S,
                         deadline: float | None = None) -> bool:
        def claim(conn: sqlite3.Connection, now: float) -> bool:
            conn.execute("DELETE FROM harness_park_claims WHERE park_id=? AND until<=?", (park_id, now))
            return conn.execute("INSERT OR IGNORE INTO harness_park_claims VALUES (?, ?)",
                                (park_id, now + ttl_s)).rowcount == 1
        return await self._run(lambda: self._write(claim), deadline)

    async def reserve_spend(self, key: str, usd: float, quota: float, day: str | None = None, *,
                            ttl_s: float = 300.0, deadline: float | None = None) -> str | None:
        day = day or today()

        def reserve(conn: sqlite3.Connection, now: float) -> str | None:
            conn.execute("DELETE FROM harness_holds WHERE key=? AND day=? AND until<=?",
                         (key, day, now))
            held = conn.execute("SELECT COALESCE(SUM(usd), 0) FROM harness_holds "
                                "WHERE key=? AND day=?", (key, day)).fetchone()[0]
            if not fits(quota, _spent(conn, key, day), float(held), usd):
                return None
            rid = new_reservation_id(day)
            conn.execute("INSERT INTO harness_holds(id, key, day, usd, until) VALUES (?,?,?,?,?)",
                         (rid, key, day, usd, now + ttl_s))
            return rid

        return await self._run(lambda: self._write(reserve), deadline,
                               give_back=lambda rid: self.settle_spend(key, rid, 0.0, day))

    async def settle_spend(self, key: str, reservation_id: str, actual_usd: float,
                           day: str | None = None, *, deadline: float | None = None) -> float:
        day = day or reservation_day(reservation_id)

        def settle(conn: sqlite3.Connection, _: float) -> float:
            conn.execute("DELETE FROM harness_holds WHERE id=?", (reservation_id,))
            first = conn.execute("INSERT OR IGNORE INTO harness_settled(id, day) VALUES (?, ?)",
                                 (reservation_id, day)).rowcount
            return _charge(conn, key, day, actual_usd) if first else _spent(conn, key, day)

        return await self._run(lambda: self._write(settle), deadline)

    # ---------------------------------------------------------- breakers

    async def breaker_allow(self, tool: str, cooldown_s: float, *, probe_lease_s: float = 60.0,
                            deadline: float | None = None) -> BreakerDecision:
        def allow(conn: sqlite3.Connection, now: float) -> BreakerDecision:
            breaker = _breaker(conn, tool)
            decision = breaker_allow_step(breaker, now, cooldown_s, probe_lease_s)
            if decision == "probe":
                _save_breaker(conn, tool, breaker)
            return decision

        def allow_or_claim() -> BreakerDecision:
            # most calls meet a closed breaker (no row): no write lock for them
            if self._read(lambda c: c.execute("SELECT 1 FROM harness_breakers WHERE tool=?",
                                              (tool,)).fetchone()) is None:
                return "closed"
            return self._write(allow)

        return await self._run(allow_or_claim, deadline)

    async def breaker_renew(self, tool: str, probe_lease_s: float, *, deadline: float | None = None) -> bool:
        def renew(conn: sqlite3.Connection, now: float) -> bool:
            breaker = _breaker(conn, tool)
            held = breaker_renew_step(breaker, now, probe_lease_s)
            if held:
                _save_breaker(conn, tool, breaker)
            return held

        return await self._run(lambda: self._write(renew), deadline)

    async def breaker_record(self, tool: str, ok: bool, failures_to_open: int, *,
                             deadline: float | None = None, probe: bool = False) -> BreakerState:
        def record(conn: sqlite3.Connection, now: float) -> BreakerState:
            breaker = _breaker(conn, tool)
            state = breaker_record_step(breaker, now, ok, failures_to_open, probe)
            _save_breaker(conn, tool, breaker)
            return state

        return await self._run(lambda: self._write(record), deadline)

    # ------------------------------------------------------- rate limits

    async def rate_acquire(self, key: str, per_min: int, cost: int = 1, *,
                           deadline: float | None = None) -> float:
        def acquire(conn: sqlite3.Connection, now: float) -> float:
            row = conn.execute("SELECT tat FROM harness_rates WHERE key=?", (key,)).fetchone()
            tat, wait = gcra(float(row[0]) if row else now, now, per_min, cost)
            if wait == 0.0:
                conn.execute("INSERT INTO harness_rates(key, tat) VALUES (?, ?) "
                             "ON CONFLICT(key) DO UPDATE SET tat=excluded.tat", (key, tat))
            return wait

        return await self._run(lambda: self._write(acquire), deadline,
                               give_back=unit_give_back(self, key, per_min, cost), taken=_unit_taken)

    async def rate_refund(self, key: str, per_min: int, cost: float = 1, *,
                          deadline: float | None = None) -> None:
        def refund(conn: sqlite3.Connection, now: float) -> None:
            row = conn.execute("SELECT tat FROM harness_rates WHERE key=?", (key,)).fetchone()
            if row or cost < 0:  # units taken count from now at the earliest
                conn.execute("INSERT INTO harness_rates(key, tat) VALUES (?, ?) "
                             "ON CONFLICT(key) DO UPDATE SET tat=excluded.tat",
                             (key, gcra_refund(float(row[0]) if row else now, now, per_min, cost)))

        await self._run(lambda: self._write(refund), deadline)

    # ------------------------------------------------------------ leases

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        def acquire(conn: sqlite3.Connection, now: float) -> str | None:
            conn.execute("DELETE FROM harness_leases WHERE key=? AND until<=?", (key, now))
            held = conn.execute("SELECT COUNT(*) FROM harness_leases WHERE key=?",
                                (key,)).fetchone()[0]
            if held >= max_in_flight:
                return None
            lid = new_lease_id()
            conn.execute("INSERT INTO harness_leases(id, key, until) VALUES (?, ?, ?)",
                         (lid, key, now + lease_s))
            return lid

        return await self._run(lambda: self._write(acquire), deadline,
                               give_back=lambda lid: self.lease_release(key, lid))

    async def lease_renew(self, key: str, lease_id: str, lease_s: float, *,
                          deadline: float | None = None) -> bool:
        def renew(conn: sqlite3.Connection, now: float) -> bool:
            return conn.execute("UPDATE harness_leases SET until=? WHERE id=? AND key=? AND until>?",
                                (now + lease_s, lease_id, key, now)).rowcount == 1

        return await self._run(lambda: self._write(renew), deadline)

    async def lease_release(self, key: str, lease_id: str, *,
                            deadline: float | None = None) -> None:
        def release(conn: sqlite3.Connection, _: float) -> None:
            conn.execute("DELETE FROM harness_leases WHERE id=? AND key=?", (lease_id, key))

        await self._run(lambda: self._write(release), deadline)


def _spent(conn: sqlite3.Connection, key: str, day: str) -> float:
    row = conn.execute("SELECT usd FROM harness_spend WHERE key=? AND day=?", (key, day)).fetchone()
    return float(row[0]) if row else 0.0


def _charge(conn: sqlite3.Connection, key: str, day: str, usd: float) -> float:
    conn.execute("INSERT INTO harness_spend(key, day, usd) VALUES (?, ?, ?) "
                 "ON CONFLICT(key, day) DO UPDATE SET usd = usd + excluded.usd", (key, day, usd))
    return _spent(conn, key, day)


def _breaker(conn: sqlite3.Connection, tool: str) -> Breaker:
    row = conn.execute("SELECT state, failures, opened, probe_until FROM harness_breakers "
                       "WHERE tool=?", (tool,)).fetchone()
    return Breaker(row[0], int(row[1]), float(row[2]), float(row[3])) if row else Breaker()


def _save_breaker(conn: sqlite3.Connection, tool: str, b: Breaker) -> None:
    if b.state == "closed" and b.failures == 0:
        conn.execute("DELETE FROM harness_breakers WHERE tool=?", (tool,))
        return
    conn.execute("INSERT INTO harness_breakers(tool, state, failures, opened, probe_until) "
                 "VALUES (?, ?, ?, ?, ?) ON CONFLICT(tool) DO UPDATE SET state=excluded.state, "
                 "failures=excluded.failures, opened=excluded.opened, "
                 "probe_until=excluded.probe_until",
                 (tool, b.state, b.failures, b.opened, b.probe_until))


def _unit_taken(wait: float) -> bool:
    """Whether a rate acquisition's answer took its units (no wait)."""
    return wait == 0.0

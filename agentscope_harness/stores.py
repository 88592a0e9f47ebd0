"""Where the per-principal daily spend lives, so a quota survives the process.

One small protocol, three stores: in memory (default), SQLite (one host, many
processes) and Redis (many hosts). A store that cannot be reached raises
``DependencyDown``: the budget then fails closed.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import sqlite3
import threading
from typing import Protocol, runtime_checkable

from .errors import DependencyDown


def today() -> str:
    """The UTC day the spend is charged to."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")


def daily_left(quota: float, spent: float) -> float:
    """What is left of a daily quota; float residue of summed charges
    (ten charges of 0.1 leave 1e-16 of 1.0) is nothing left."""
    left = quota - spent
    return left if left > 1e-9 * max(quota, 1.0) else 0.0


DEFAULT_STORE_TIMEOUT_S = 2.0
"""How long one store call may take when the store sets no timeout of its own."""


def store_timeout(store: object) -> float:
    """The bound of one call to ``store`` (its own ``timeout_s``, if any)."""
    value = getattr(store, "timeout_s", None)
    return float(value) if isinstance(value, (int, float)) else DEFAULT_STORE_TIMEOUT_S


@runtime_checkable
class LedgerStore(Protocol):
    """Daily spend per principal key."""

    async def get_spend(self, key: str, day: str | None = None) -> float:
        """USD spent by ``key`` on ``day`` (today by default)."""
        ...

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        """Add ``usd`` atomically; the new total."""
        ...


class MemoryStore:
    """In-process store (the default); lost with the process."""

    def __init__(self) -> None:
        self._spend: dict[tuple[str, str], float] = {}

    async def get_spend(self, key: str, day: str | None = None) -> float:
        return self._spend.get((key, day or today()), 0.0)

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        slot = (key, day or today())
        self._spend[slot] = self._spend.get(slot, 0.0) + usd
        return self._spend[slot]


class SQLiteStore:
    """SQLite file store, safe across processes on one host (WAL journal,
    ``BEGIN IMMEDIATE`` so concurrent increments serialise)."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        try:
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS harness_spend ("
                    " key TEXT NOT NULL, day TEXT NOT NULL, usd REAL NOT NULL,"
                    " PRIMARY KEY (key, day))",
                )
        except sqlite3.Error as exc:
            raise DependencyDown(f"SQLite store {path}", exc) from exc

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)

    def _get(self, key: str, day: str) -> float:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT usd FROM harness_spend WHERE key=? AND day=?", (key, day),
            ).fetchone()
        return float(row[0]) if row else 0.0

    def _add(self, key: str, usd: float, day: str) -> float:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO harness_spend(key, day, usd) VALUES (?, ?, ?) "
                "ON CONFLICT(key, day) DO UPDATE SET usd = usd + excluded.usd",
                (key, day, usd),
            )
            total = conn.execute(
                "SELECT usd FROM harness_spend WHERE key=? AND day=?", (key, day),
            ).fetchone()[0]
            conn.execute("COMMIT")
            return float(total)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    async def get_spend(self, key: str, day: str | None = None) -> float:
        try:
            return await asyncio.to_thread(self._get, key, day or today())
        except sqlite3.Error as exc:
            raise DependencyDown(f"SQLite store {self.path}", exc) from exc

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        try:
            return await asyncio.to_thread(self._add, key, usd, day or today())
        except sqlite3.Error as exc:
            raise DependencyDown(f"SQLite store {self.path}", exc) from exc


class RedisStore:
    """Redis store for many hosts: ``INCRBYFLOAT`` on a day key that expires
    after ``ttl_days``. Needs the ``agentscope-harness[redis]`` extra."""

    def __init__(self, url: str, prefix: str = "harness:spend", ttl_days: int = 2) -> None:
        try:
            import redis.asyncio as redis_asyncio
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ImportError(
                "RedisStore needs the redis extra: pip install 'agentscope-harness[redis]'",
            ) from exc
        self.url = url
        self.prefix = prefix
        self.ttl_s = ttl_days * 86400
        self._client = redis_asyncio.Redis.from_url(url)

    def _key(self, key: str, day: str) -> str:
        return f"{self.prefix}:{day}:{key}"

    async def get_spend(self, key: str, day: str | None = None) -> float:
        try:
            value = await self._client.get(self._key(key, day or today()))
        except Exception as exc:  # noqa: BLE001 - any client error is an outage
            raise DependencyDown(f"Redis store {self.url}", exc) from exc
        return float(value) if value is not None else 0.0

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        name = self._key(key, day or today())
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.incrbyfloat(name, usd)
                pipe.expire(name, self.ttl_s)
                total, _ = await pipe.execute()
        except Exception as exc:  # noqa: BLE001 - any client error is an outage
            raise DependencyDown(f"Redis store {self.url}", exc) from exc
        return float(total)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

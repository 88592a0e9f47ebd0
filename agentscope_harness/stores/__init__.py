"""Where everything the harness shares between runs lives: daily spend and
its reservations, circuit breakers, rate limits and concurrency leases.

One protocol (``LedgerStore``, plus ``LeaseRenewal`` for concurrency
limits, ``ParkRecords`` for replies parked on a human and resumed
elsewhere), three stores: ``MemoryStore`` (one process,
the default), ``SQLiteStore`` (one host, many processes) and ``RedisStore``
(many hosts). A store that cannot answer within its ``timeout_s`` or the
caller's ``deadline`` raises ``DependencyDown``: budgets and limits then fail
closed."""

from ._base import (
    DEFAULT_TIMEOUT_S,
    PARK_TTL_S,
    PROBE_LEASE_S,
    BreakerDecision,
    BreakerState,
    LeaseRenewal,
    LedgerStore,
    ParkRecords,
    ProbeRenewal,
    RateRefund,
    SpendStore,
    bounded,
    daily_left,
    give_back_soon,
    given_back_if_abandoned,
    store_call,
    store_timeout,
    today,
)
from .memory import MemoryStore
from .redis import RedisStore
from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "PARK_TTL_S",
    "PROBE_LEASE_S",
    "BreakerDecision",
    "BreakerState",
    "LeaseRenewal",
    "LedgerStore",
    "MemoryStore",
    "ParkRecords",
    "ProbeRenewal",
    "RateRefund",
    "RedisStore",
    "SQLiteStore",
    "SpendStore",
    "bounded",
    "daily_left",
    "give_back_soon",
    "given_back_if_abandoned",
    "store_call",
    "store_timeout",
    "today",
]

"""The Redis store: many hosts behave as one harness.

Every decision that reads then writes is one Lua script, so it is atomic on
the server. The scripts read the clock with ``TIME`` on the server: all
hosts share one clock, and a skewed worker clock cannot open a breaker early
or admit a rate-limited call. Times are integer microseconds, written with
``%.0f`` (Lua would otherwise print 16-digit numbers in ``%.14g``). Every
key has a TTL. Assumes one Redis primary (with replicas or Sentinel if you
like), not Redis Cluster: a principal's spend and its reservations are two
keys read by one script."""

from __future__ import annotations

import asyncio
import datetime as _dt
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

from ..errors import DependencyDown
from ._base import (
    DEFAULT_TIMEOUT_S,
    PARK_TTL_S,
    BreakerDecision,
    BreakerState,
    bounded,
    give_back_soon,
    given_back_if_abandoned,
    new_lease_id,
    new_reservation_id,
    positive,
    reservation_day,
    unit_give_back,
    whole,
)

T = TypeVar("T")

CLOCK_READ_S = 60.0
"""How long the server's ``TIME`` is carried on by this host's monotonic clock before it is read again."""
CLOCK_JUMP_S = 5.0
"""A gap this wide between this host's wall and monotonic clocks since the
read (the host was suspended, restored from a snapshot, or its clock
stepped) reads ``TIME`` again at once."""

_NOW = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local function num(x) return string.format('%.0f', x) end
"""

# KEYS: spend, holds. ARGV: id, usd, quota, hold_us, key_ttl_s.
# Mirrors MemoryStore.reserve_spend and _base.fits.
RESERVE = _NOW + """
local committed = tonumber(redis.call('GET', KEYS[1]) or '0')
local held = 0
local holds = redis.call('HGETALL', KEYS[2])
for i = 1, #holds, 2 do
  local usd, untl = string.match(holds[i + 1], '^(%S+) (%S+)$')
  if tonumber(untl) <= now then
    redis.call('HDEL', KEYS[2], holds[i])
  else
    held = held + tonumber(usd)
  end
end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 1 end  -- a resend: this id holds already
local quota = tonumber(ARGV[3])
if committed + held + tonumber(ARGV[2]) > quota + 1e-9 * math.max(quota, 1.0) then
  return false
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. num(now + tonumber(ARGV[4])))
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
"""

# KEYS: spend, holds, settled. ARGV: id, actual_usd, key_ttl_s. Once per id:
# a settle sent again (its first answer lost) charges nothing more.
SETTLE = """
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('SADD', KEYS[3], ARGV[1]) == 0 then
  return redis.call('GET', KEYS[1]) or '0'
end
redis.call('EXPIRE', KEYS[3], ARGV[3])
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return total
"""

# KEYS: breaker. ARGV: cooldown_us, probe_lease_us, key_ttl_s.
# Mirrors _base.breaker_allow_step.
BREAKER_ALLOW = _NOW + """
local b = redis.call('HMGET', KEYS[1], 'state', 'opened', 'probe_until')
local state = b[1]
if not state or state == 'closed' then return 'closed' end
local due
if state == 'open' then
  due = now >= tonumber(b[2]) + tonumber(ARGV[1])
else
  due = now >= tonumber(b[3])
end
if not due then return 'open' end
redis.call('HSET', KEYS[1], 'state', 'half', 'probe_until', num(now + tonumber(ARGV[2])))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 'probe'
"""

# KEYS: breaker. ARGV: probe_lease_us, key_ttl_s. Mirrors _base.breaker_renew_step.
BREAKER_RENEW = _NOW + """
local b = redis.call('HMGET', KEYS[1], 'state', 'probe_until')
if b[1] ~= 'half' then return 0 end
redis.call('HSET', KEYS[1], 'probe_until', num(math.max(tonumber(b[2]), now + tonumber(ARGV[1]))))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: breaker. ARGV: ok (1/0), failures_to_open, key_ttl_s, probe (1/0: the half-open probe's outcome).
# Mirrors _base.breaker_record_step; a clean closed breaker is no key.
BREAKER_RECORD = _NOW + """
local b = redis.call('HMGET', KEYS[1], 'state', 'failures')
local state = b[1] or 'closed'
if state == 'open' or (state == 'half' and ARGV[4] ~= '1') then return 'open' end  -- the probe alone decides
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[1])
  return 'closed'
end
local failures = tonumber(b[2] or '0') + 1
local result = 'closed'
if state == 'half' or failures >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened', num(now))
  result = 'open'
end
redis.call('HSET', KEYS[1], 'failures', failures)
if result == 'closed' then redis.call('HSET', KEYS[1], 'state', 'closed') end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return result
"""

# KEYS: rate. ARGV: per_min, cost. Mirrors _base.gcra (cost <= per_min is
# checked by the caller). Returns the wait in microseconds, '0' if admitted.
RATE = _NOW + """
local minute = 60000000
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + minute * tonumber(ARGV[2]) / tonumber(ARGV[1])
local allow_at = new_tat - minute
if allow_at > now then return num(math.max(math.ceil(allow_at - now), 1)) end  -- never "0": not admitted
redis.call('SET', KEYS[1], num(new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1)
return '0'
"""

# KEYS: rate, this give-back's own key. ARGV: per_min, cost. Mirrors
# _base.gcra_refund (a negative cost takes units already used, from now at the
# earliest); once per give-back (its key, two minutes).
RATE_REFUND = _NOW + """
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', 120000) then return '0' end  -- a resend: given back already
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[2]) < 0 and tat < now then tat = now end
local back = tat - 60000000 * tonumber(ARGV[2]) / tonumber(ARGV[1])
if back <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], num(back), 'PX', math.floor((back - now) / 1000) + 1)
end
return '0'
"""

# KEYS: claimed. ARGV: token, ttl_s. A resend (its first answer lost) finds its own token.
CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
"""

# KEYS: leases (sorted set by expiry). ARGV: id, max_in_flight, lease_us.
LEASE = _NOW + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', num(now))
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end  -- a resend: this id holds already
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return false end
redis.call('ZADD', KEYS[1], num(now + tonumber(ARGV[3])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.floor((tonumber(last[2]) - now) / 1000) + 1)
return 1
"""

# KEYS: leases. ARGV: id, lease_us. A lapsed lease is not taken again.
RENEW = _NOW + """
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then return false end
redis.call('ZADD', KEYS[1], 'XX', num(now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.floor((tonumber(last[2]) - now) / 1000) + 1)
return 1
"""


_SCRIPTS = {
    "reserve": RESERVE, "settle": SETTLE, "allow": BREAKER_ALLOW, "record": BREAKER_RECORD,
    "renew_probe": BREAKER_RENEW, "rate": RATE, "rate_refund": RATE_REFUND, "lease": LEASE, "renew": RENEW,
    "claim": CLAIM,
}
"""The Lua scripts, by the name a store method runs them with."""


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}"


class _Connection:
    """One event loop's client and the store's scripts registered on it."""

    __slots__ = ("client", "scripts")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.scripts = {name: client.register_script(source) for name, source in _SCRIPTS.items()}


REDIS_SCHEMES = ("redis", "rediss", "unix")


def _redis_url(url: Any, parse: Callable[[str], Any]) -> Any:
    """redis-py's reading (``parse``: its own parser) of a URL it can
    connect with (``redis://``, ``rediss://``, ``unix://``): any other fails
    every call, so it fails here, named, and never quoted (a password in it
    would be)."""
    usage = ("url must be a redis://, rediss:// or unix:// URL redis-py reads "
             "(a password's '/', '@', ':', '#', '?' and '[' percent-encoded)")
    scheme, _, rest = url.partition("://") if isinstance(url, str) else ("", "", "")
    if scheme.lower() not in REDIS_SCHEMES:
        raise ValueError(f"{usage}, not {_without_credentials(url)!r}")
    netloc, _, path = rest.partition("?")[0].partition("/")
    # an '@' past the first '/': a password's '/' left unencoded (a socket's path may hold one)
    if "@" in path and (scheme.lower() != "unix" or (netloc and not netloc.endswith("@"))):
        raise ValueError(f"{usage}: its credentials hold an unencoded '/'")
    if scheme.lower() != "unix" and path and not (path.isascii() and path.isdigit()):
        # redis-py reads a database it cannot number as none: db 0, shared with whatever lives there
        raise ValueError(f"{usage}: its database (the path after the host) must be a whole number")
    try:
        return parse(url)
    except ValueError:  # its message may quote the password
        raise ValueError(f"{usage}: {_without_credentials(url)!r} does not read as one") from None


def _told(scheme: str, read: Mapping[str, Any]) -> str:
    """A URL redis-py read (``read``: its parts) as it may be told: its
    address and database, ``***@`` for credentials."""
    who = "***@" if read.get("username") or read.get("password") else ""
    if "path" in read:
        return f"{scheme}://{who}{read['path']}" + (f"?db={read['db']}" if "db" in read else "")
    host = read.get("host", "localhost")
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{who}{host}:{read.get('port', 6379)}/{read.get('db', 0)}"


def _without_credentials(url: Any) -> str:
    """``url`` as it may be told (the model, a report, a log): what comes
    before its last ``@`` (credentials, however spelled, a ``#`` or ``?`` in
    them too) and its query (``?password=``) left out, and a host that is
    no host (``user:password`` with no ``@``) masked."""
    if not isinstance(url, str):
        return type(url).__name__
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme, or a misspelt one ("redis:/", "redis//"): all of it is told as an address
        scheme, rest = "", url
    masked = "@" in rest
    rest = rest.rpartition("@")[2]
    address = rest.partition("?")[0].partition("#")[0]
    host, slash, path = address.partition("/")
    port = host.rpartition(":")[2] if ":" in host else ""
    if port and not port.isdigit() and not host.endswith("]"):  # no port: a password, written without its '@'
        host, masked = "", True
    return f"{scheme}{sep}{'***@' if masked else ''}{host}{slash}{path}"


class RedisStore:
    """Redis store for many hosts. Needs the ``agentscope-harness[redis]`` extra.

    Keys (``prefix`` default ``harness``): ``{prefix}:spend:{day}:{key}``
    (committed USD, a float string), ``{prefix}:holds:{day}:{key}`` (hash
    of reservations) and ``{prefix}:settled:{day}:{key}`` (the ids settled)
    expire after ``ttl_days``; ``{prefix}:breaker:{tool}``
    after ``state_ttl_s`` without a write; ``{prefix}:rate:{key}`` when the
    bucket is full again, ``{prefix}:refund:{key}:{id}`` (a unit given back,
    once) two minutes after it; ``{prefix}:lease:{key}`` when its last lease lapses;
    ``{prefix}:parked:{reply_id}`` (a reply parked on a human) and ``{prefix}:claimed:{park_id}``
    (its one answer) after their ``ttl_s``.

    Every call is bounded by ``timeout_s`` (socket timeouts too) and the
    caller's ``deadline``; an unreachable, slow or restarting server is
    ``DependencyDown``. The connection pool reconnects by itself: when the
    server is back, so is the store. A command that fails on a dropped
    connection is sent once more; should the first one have run, a charge
    over-counts (charged twice), never under-counts, and a lease, a
    reservation, a park's claim or a rate unit given back is taken (given)
    once (its id is the client's: a resend finds it).
    At most ``max_connections`` connections are open per event loop (a pool
    each: a worker may run each request in its own); more concurrent calls
    wait for one (within ``timeout_s``), they do not fail."""

    def __init__(self, url: str, prefix: str = "harness", ttl_days: int = 2, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, state_ttl_s: int = 86400,
                 max_connections: int = 50) -> None:
        try:
            import redis.asyncio as redis_asyncio
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError
            from redis.exceptions import RedisError
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ImportError(
                "RedisStore needs the redis extra: pip install 'agentscope-harness[redis]'",
            ) from exc
        ttl_days, state_ttl_s = whole("ttl_days", ttl_days), whole("state_ttl_s", state_ttl_s)
        max_connections = whole("max_connections", max_connections)
        positive(timeout_s=timeout_s)
        from redis.asyncio.connection import parse_url

        read = _redis_url(url, parse_url)
        if not isinstance(prefix, str):  # every key is built from it: None or 5 failed each call
            raise ValueError(f"prefix must be text (the start of every key), not {type(prefix).__name__}")
        self.url = url
        self.prefix = prefix
        self.ttl_s = ttl_days * 86400
        self.state_ttl_s = state_ttl_s
        self.timeout_s = timeout_s
        # named without its credentials: what the model, the report and the logs read of it
        self.told = f"Redis store {_told(url.partition('://')[0].lower(), read)}"
        """How this store is named wherever it is told (the model, a report, a
        log): its address and database, ``***@`` for credentials."""
        self._errors: tuple[type[BaseException], ...] = (RedisError, OSError)
        # a blocking pool: a call beyond max_connections waits its turn (within
        # timeout_s and the caller's deadline) instead of failing at once
        self._pool_kw: dict[str, Any] = {
            "max_connections": max_connections, "timeout": timeout_s, "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
            "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        }
        self._redis = redis_asyncio
        self._by_loop: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._loops_lock = threading.Lock()
        # its TIME, and when it was read (monotonic, and this host's wall clock)
        self._server_time: tuple[float, float, float] | None = None

    def _connection(self) -> _Connection:
        """The connection pool and scripts of the running event loop. An
        asyncio connection belongs to the loop that opened it: a worker that
        runs each request in its own ``asyncio.run`` gets a pool per loop (one
        shared pool failed every other request with ``dependency_down``)."""
        loop = asyncio.get_running_loop()
        connection = self._by_loop.get(loop)
        if connection is not None:
            return connection
        with self._loops_lock:  # loops of several threads (a threaded sync worker) at once
            # a closed loop's connections can no longer be used, or closed: dropped with it
            self._by_loop = {other: c for other, c in self._by_loop.items() if not other.is_closed()}
            pool = self._redis.BlockingConnectionPool.from_url(self.url, **self._pool_kw)
            connection = self._by_loop[loop] = _Connection(self._redis.Redis.from_pool(pool))
        return connection

    def _key(self, kind: str, *parts: str) -> str:
        return ":".join((self.prefix, kind, *parts))

    async def _run(self, call: Callable[[], Awaitable[T]], deadline: float | None,
                   give_back: Callable[[Any], Awaitable[object]] | None = None,
                   taken: Callable[[Any], bool] | None = None) -> T:
        """One command, bounded; ``give_back``: an acquisition's. Once sent,
        the server runs it whether or not the caller still waits, or reads
        the answer: one the caller stopped waiting for gives back what its
        answer took (``taken``; default: any answer), and one that failed
        (a read timeout, a dropped connection) may have taken its slot, and
        gives it back, unless its kind counts what it gives back (a rate
        unit given back untaken would be a unit too many: with ``taken``,
        only a known one is)."""
        async def guarded() -> T:
            try:
                return await call()
            except self._errors as exc:
                if give_back is not None and taken is None:
                    give_back_soon(give_back(None))
                raise DependencyDown(self.told, exc) from exc

        work = guarded() if give_back is None else given_back_if_abandoned(guarded, give_back, taken or bool)
        return await bounded(work, self.told, self.timeout_s, deadline)

    async def _script(self, name: str, keys: list[str], args: list[Any], deadline: float | None,
                      give_back: Callable[[Any], Awaitable[object]] | None = None,
                      taken: Callable[[Any], bool] | None = None) -> Any:
        script = self._connection().scripts[name]
        return await self._run(lambda: cast(Awaitable[Any], script(keys=keys, args=args)), deadline, give_back,
                               taken)

    # ------------------------------------------------------------ spend

    async def _today(self, deadline: float | None) -> str:
        """The UTC day by the server's clock, as every other shared decision
        reads it: a worker whose own clock is days off, or stepped since,
        charges (and reads) the fleet's day, never a day of its own with a
        quota unspent. The server's ``TIME`` is read at most once in
        ``CLOCK_READ_S``, and carried on by this host's monotonic clock
        (which no clock step moves); read again at once when the wall clock
        and the monotonic clock part (a suspend or a snapshot restore,
        which the monotonic clock does not count)."""
        kept = self._server_time
        since = None if kept is None else time.monotonic() - kept[1]
        if (kept is None or since is None or since > CLOCK_READ_S  # (``since`` is None with ``kept``)
                or abs(time.time() - kept[2] - since) > CLOCK_JUMP_S):  # suspended, restored, or stepped
            seconds, micros = await self._run(lambda: self._connection().client.time(), deadline)
            kept = self._server_time = (seconds + micros / 1e6, time.monotonic(), time.time())
            since = 0.0
        now = _dt.datetime.fromtimestamp(kept[0] + since, _dt.timezone.utc)
        return now.strftime("%Y-%m-%d")

    async def get_spend(self, key: str, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        name = self._key("spend", day or await self._today(deadline), key)
        value = await self._run(lambda: self._connection().client.get(name), deadline)
        return float(value) if value is not None else 0.0

    async def park_put(self, reply_id: str, record: str, *, ttl_s: float = PARK_TTL_S,
                       deadline: float | None = None) -> None:
        name = self._key("parked", reply_id)
        await self._run(lambda: self._connection().client.set(name, record, ex=max(1, math.ceil(ttl_s))), deadline)

    async def park_get(self, reply_id: str, *, deadline: float | None = None) -> str | None:
        name = self._key("parked", reply_id)
        value = await self._run(lambda: self._connection().client.get(name), deadline)
        return None if value is None else (value.decode() if isinstance(value, bytes) else str(value))

    async def park_claim(self, park_id: str, *, ttl_s: float = PARK_TTL_S,
                         deadline: float | None = None) -> bool:
        # under a token of its own: a resend (its first answer lost) finds it its own claim
        taken = await self._script("claim", [self._key("claimed", park_id)],
                                   [uuid.uuid4().hex, max(1, math.ceil(ttl_s))], deadline)
        return bool(taken)

    async def add_spend(self, key: str, usd: float, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        name = self._key("spend", day or await self._today(deadline), key)

        async def charge() -> float:
            async with self._connection().client.pipeline(transaction=True) as pipe:
                pipe.incrbyfloat(name, usd)
                pipe.expire(name, self.ttl_s)
                total, _ = await pipe.execute()
            return float(total)

        return await self._run(charge, deadline)

    async def reserve_spend(self, key: str, usd: float, quota: float, day: str | None = None, *,
                            ttl_s: float = 300.0, deadline: float | None = None) -> str | None:
        day = day or await self._today(deadline)
        rid = new_reservation_id(day)
        held = await self._script(
            "reserve", [self._key("spend", day, key), self._key("holds", day, key)],
            [rid, repr(float(usd)), repr(float(quota)), _us(ttl_s), self.ttl_s], deadline,
            give_back=lambda _: self.settle_spend(key, rid, 0.0, day))
        return rid if held else None

    async def settle_spend(self, key: str, reservation_id: str, actual_usd: float,
                           day: str | None = None, *, deadline: float | None = None) -> float:
        day = day or reservation_day(reservation_id)
        total = await self._script(
            "settle", [self._key("spend", day, key), self._key("holds", day, key), self._key("settled", day, key)],
            [reservation_id, repr(float(actual_usd)), self.ttl_s], deadline)
        return float(total)

    # ---------------------------------------------------------- breakers

    async def breaker_allow(self, tool: str, cooldown_s: float, *, probe_lease_s: float = 60.0,
                            deadline: float | None = None) -> BreakerDecision:
        ttl = max(self.state_ttl_s, math.ceil(cooldown_s + probe_lease_s) + 1)
        decision = await self._script("allow", [self._key("breaker", tool)],
                                      [_us(cooldown_s), _us(probe_lease_s), ttl], deadline)
        return cast(BreakerDecision, decision.decode())

    async def breaker_renew(self, tool: str, probe_lease_s: float, *, deadline: float | None = None) -> bool:
        ttl = max(self.state_ttl_s, math.ceil(probe_lease_s) + 1)
        held = await self._script("renew_probe", [self._key("breaker", tool)], [_us(probe_lease_s), ttl], deadline)
        return bool(int(held))

    async def breaker_record(self, tool: str, ok: bool, failures_to_open: int, *,
                             deadline: float | None = None, probe: bool = False) -> BreakerState:
        state = await self._script("record", [self._key("breaker", tool)],
                                   [1 if ok else 0, failures_to_open, self.state_ttl_s, 1 if probe else 0], deadline)
        return cast(BreakerState, state.decode())

    # ------------------------------------------------------- rate limits

    async def rate_acquire(self, key: str, per_min: int, cost: int = 1, *,
                           deadline: float | None = None) -> float:
        if per_min <= 0 or cost < 0:
            raise ValueError(f"rate limit needs per_min > 0 and cost >= 0 (got {per_min}, {cost})")
        if cost > per_min:
            return math.inf
        wait_us = await self._script("rate", [self._key("rate", key)], [per_min, cost], deadline,
                                     give_back=unit_give_back(self, key, per_min, cost),
                                     taken=lambda wait: int(wait) == 0)
        return float(wait_us) / 1e6

    async def rate_refund(self, key: str, per_min: int, cost: float = 1, *,
                          deadline: float | None = None) -> None:
        # once, under an id of its own: a resend (its first answer lost) gives back nothing more
        await self._script("rate_refund", [self._key("rate", key), self._key("refund", key, uuid.uuid4().hex)],
                           [per_min, cost], deadline)

    # ------------------------------------------------------------ leases

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        lid = new_lease_id()
        got = await self._script("lease", [self._key("lease", key)],
                                 [lid, max_in_flight, _us(lease_s)], deadline,
                                 give_back=lambda _: self.lease_release(key, lid))
        return lid if got else None

    async def lease_renew(self, key: str, lease_id: str, lease_s: float, *,
                          deadline: float | None = None) -> bool:
        renewed = await self._script("renew", [self._key("lease", key)], [lease_id, _us(lease_s)], deadline)
        return bool(renewed)

    async def lease_release(self, key: str, lease_id: str, *,
                            deadline: float | None = None) -> None:
        name = self._key("lease", key)
        await self._run(lambda: self._connection().client.zrem(name, lease_id), deadline)

    async def aclose(self) -> None:
        """Close the running event loop's connection pool (another loop's
        connections cannot be closed from here: they go with their loop)."""
        with self._loops_lock:
            connection = self._by_loop.pop(asyncio.get_running_loop(), None)
        if connection is not None:
            await connection.client.aclose()

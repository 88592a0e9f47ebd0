"""Red team, round 94. Redis rate_acquire answers "admitted" (wait 0) for a call it did NOT admit.

RATE returns the wait as ``string.format('%.0f', allow_at - now)``. With a
unit width that is not a whole number of microseconds (60e6*cost/per_min,
e.g. per_min=7, cost=2 -> 17142857.142857 us) a wait in (0, 0.5] us is
printed "0": the script wrote nothing (not admitted), yet
``RedisStore.rate_acquire`` returns 0.0, which ``Fleet._rate`` takes as
"taken" (``wait <= 0``) and the call is made with no unit counted: the bucket
is one call short, so the limit admits one more than it allows. The same
answer, when the caller stopped waiting, is ``taken`` (``int(wait) == 0``)
and a unit never taken is given back (``rate_refund``): one more again."""

import uuid

import pytest
from scripted import REDIS_URL

from agentscope_harness.stores import RedisStore

URL = REDIS_URL
pytestmark = pytest.mark.usefixtures("redis_reachable")
PER_MIN, COST = 7, 2
SETTER = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = now + 60000000 - math.floor(60000000 * tonumber(ARGV[2]) / tonumber(ARGV[1])) + tonumber(ARGV[3])
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', 120000)
return string.format('%.0f', tat)
"""


async def test_redis_rate_acquire_never_answers_admitted_without_taking() -> None:
    prefix = f"rt93rate{uuid.uuid4().hex[:8]}"
    store = RedisStore(URL, prefix=prefix)
    client = store._connection().client
    setter = client.register_script(SETTER)
    key = f"{prefix}:rate:k"
    bad = []
    for i in range(4000):
        d = 80 + (i % 100)  # the gap (us) between the setter's TIME and the rate script's
        before = await setter(keys=[key], args=[PER_MIN, COST, d])
        wait = await store.rate_acquire("k", PER_MIN, COST)
        after = await client.get(key)
        if wait == 0.0 and after == before:  # "admitted", yet the bucket did not move
            bad.append((d, before, after))
            break
    await client.delete(key)
    assert not bad, f"rate_acquire answered 0.0 (admitted) but took nothing: {bad}"

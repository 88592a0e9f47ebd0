"""Red team, round 94. A late store-level give-back frees a unit another worker's call holds.

``given_back_if_abandoned`` gives back the whole ``cost`` (``rate_refund``
= ``tat - width``) whenever the abandoned acquisition's answer arrives and
its give-back runs, however long after the take. A unit whose window has
passed since the take (the bucket went full again) no longer counts in
``tat``
refunding it then frees the unit of whoever took last. Fleet's own
give-back guards this (``_take_unit``/``still_held``: "a refund reckoned from
this never frees another caller's unit"); the store's new one does not.

Here: the caller is cancelled while Redis is busy with a slow script, the script runs (unit taken), this
worker's loop is busy for a moment (the give-back is not yet sent), another
worker takes the whole minute's 600 units after the abandoned unit's 0.1 s
window passed, then the give-back lands: a 601st unit is admitted within
~0.2 s against a 600/min limit."""

import asyncio
import threading
import time
import uuid

import pytest
import redis
from scripted import REDIS_URL

from agentscope_harness.stores import RedisStore
from agentscope_harness.stores import redis as redis_mod

URL = REDIS_URL
pytestmark = pytest.mark.usefixtures("redis_reachable")
PER_MIN = 60  # one unit: 1 s
SPIN = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
local now = start
while now < start + tonumber(ARGV[1]) do t = redis.call('TIME'); now = t[1] * 1000000 + t[2] end
return 1
"""  # Redis busy for 0.3 s (another client's slow script)


async def test_a_late_give_back_never_frees_another_workers_unit() -> None:
    prefix = f"rt93stale{uuid.uuid4().hex[:8]}"
    store = RedisStore(URL, prefix=prefix, timeout_s=5)
    other = redis.Redis.from_url(URL)
    rate = other.register_script(redis_mod.RATE)
    key = f"{prefix}:rate:k"
    await store.rate_acquire("warm", PER_MIN, 1)  # connection open

    blocker = threading.Thread(target=lambda: redis.Redis.from_url(URL)
                               .eval(SPIN, 0, 300000))
    blocker.start()
    time.sleep(0.02)
    task = asyncio.ensure_future(store.rate_acquire("k", PER_MIN, 1))
    await asyncio.sleep(0.1)
    task.cancel()  # the caller stops waiting (its reply cancelled)
    try:
        await task
    except asyncio.CancelledError:
        pass  # the caller stopped waiting; the script runs when Redis is free (~0.3 s)
    got_other: list[object] = []

    def other_worker() -> None:
        time.sleep(1.3)  # the abandoned unit's 1 s window has passed
        got_other.append(rate(keys=[key], args=[PER_MIN, PER_MIN]))  # the minute's 60 units

    t = threading.Thread(target=other_worker)
    t.start()
    time.sleep(1.45)  # this worker's loop is busy (a CPU-bound step): the give-back waits
    t.join()
    blocker.join()
    assert got_other == [b"0"], got_other  # the other worker took all 60 (the bucket was full again)
    await asyncio.sleep(0.05)  # the give-back lands
    wait = await store.rate_acquire("k", PER_MIN, 1)
    other.delete(key)
    assert wait > 0, "a 61st unit admitted ~0.2 s after 60 were taken, against 60/min (1 refills per s)"

"""Red team, round 93 (cancellation at every step, a middleware's calls): croperty test: cancel the reply after N event-loop steps, N = 1..end, for
tools/middlewares making 1-3 side calls (sequential and gathered), streamed
or not, with rate limits and a daily quota on a MemoryStore
check the
invariants after each cancellation. """

import asyncio
import gc

import pytest
from cancel_kit import build, held_reservations, rate_levels, reply
from scripted import ALICE, text

CONFIGS = [
    dict(shape=s, where=w, stream=st, parallel=p, deadline=d, rates=True, quota=True)
    for s, w in [("one", "tool"), ("seq2", "tool"), ("gather2+1", "tool"), ("timeout", "tool"),
                 ("seq2", "mw"), ("timeout", "mw")]
    for st in (False, True) for p in ((False, True) if w == "tool" else (False,)) for d in (None, 30.0)
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
async def test_cancel_at_every_step_leaves_nothing_behind(cfg: dict, tmp_path) -> None:
    for n in range(1, 400):
        env = build("memory", str(tmp_path), **cfg)
        errors: list = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _l, c, errors=errors: errors.append(c))
        before = set(asyncio.all_tasks())
        task = asyncio.create_task(reply(env))
        finished = False
        for _ in range(n):
            await asyncio.sleep(0)
            if task.done():
                finished = True
                break
        task.cancel()
        try:
            await task
        except BaseException:
            pass
        for _ in range(20):
            await asyncio.sleep(0)
        h, store, agent = env["h"], env["store"], env["agent"]
        served = env["base"].served_usd() + env["rer"].served_usd()
        report = h.last_report(agent)
        at = (n, env["base"].served, env["rer"].served)
        assert held_reservations(store) == 0, at
        assert await store.get_spend(ALICE.key) + 1e-12 >= served, at
        assert report is not None and report.spent_usd + 1e-12 >= served, at
        assert not h.table.slots, at
        assert not [t for t in asyncio.all_tasks() if t not in before and t is not asyncio.current_task()
                    and not t.done()], at
        requests = len(env["base"].served) + len(env["rer"].served)
        for key, seconds in rate_levels(store).items():
            if ":calls:" in key:
                assert seconds / 0.1 <= requests + 0.05, (at, key, seconds)
        gc.collect()
        await asyncio.sleep(0)
        assert not errors, (at, errors)
        env["base"].script[:] = [text("again", inp=10, out=5)]
        await reply(env, "hello again")
        assert h.last_report(agent).terminal_state.value == "completed", at
        loop.set_exception_handler(None)
        if finished:
            return

"""Red team, round 93. A reply cancelled while its model call's rate unit is being taken from a
SQLiteStore (the store's write waits on another worker's lock, as under load)
keeps the unit: the thread finishes the write after the caller left, the
harness never learns it took the unit, so nothing gives it back. No request
went out, yet the principal's next reply is refused ``rate_limited``.

README ("Running many workers"): "a model call that is not made, refused by a
later limit, the daily quota or a budget check, gives back its call and token
units whole"; fleet.before_model_call: "except BaseException: # cancelled
while waiting: nothing was made" -> not_made (only units already recorded)."""

import asyncio
import sqlite3
import threading
from typing import Any

from scripted import ALICE, ScriptedModel, make_agent, run, search, text

from agentscope_harness import Harness, HarnessConfig, RateLimit
from agentscope_harness.stores import SQLiteStore


def _hold_write_lock(path: str, release: threading.Event) -> threading.Thread:
    """Another worker holds SQLite's write lock until ``release`` is set."""
    locked = threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(5)
        conn.execute("COMMIT")
        conn.close()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    locked.wait(5)
    return t


async def test_a_reply_cancelled_while_taking_its_rate_unit_gives_it_back(tmp_path: Any) -> None:
    path = str(tmp_path / "fleet.db")
    store = SQLiteStore(path)
    model = ScriptedModel([text("first"), text("second")], model="base")
    h = Harness(HarnessConfig(store=store, rate_limits=[RateLimit(scope="principal", calls_per_min=1)]),
                load_entry_points=False, environ={})
    agent = make_agent(model, [search], h.middlewares())

    release = threading.Event()
    locker = _hold_write_lock(path, release)

    async def reply() -> None:
        with h.acting_for(ALICE):
            await run(agent, "hi")

    task = asyncio.create_task(reply())
    await asyncio.sleep(0.2)  # the call's rate_acquire waits on the lock in its thread
    task.cancel()
    try:
        await task
    except BaseException:
        pass
    release.set()  # the other worker commits; the abandoned thread takes the unit
    locker.join(5)
    await asyncio.sleep(0.3)
    assert model.calls == [], "no request went out"

    with h.acting_for(ALICE):
        _, final = await run(agent, "hi again")
    report = h.last_report(agent)
    got = (report.terminal_state.value, report.reason, final.get_text_content())
    assert report.terminal_state.value == "completed", got


async def test_a_side_call_a_tool_times_out_while_its_rate_unit_is_taken_gives_it_back(tmp_path: Any) -> None:
    """The same through the newest path: a tool bounds its reranker
    (``asyncio.timeout``, as in round 90's test) while the store's write
    waits on another worker
    the reranker's request never goes out, yet its
    call unit stays taken: 2 requests made, 3 units gone, the next reply is
    refused."""
    from agentscope.message import UserMsg
    from scripted import Ids, calls

    path = str(tmp_path / "fleet.db")
    store = SQLiteStore(path)
    reranker = ScriptedModel([calls(("generate_structured_output", {"ids": ["c1"]}))], model="rer")

    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        release = threading.Event()
        locker = _hold_write_lock(path, release)  # another worker writes meanwhile
        try:
            async with asyncio.timeout(0.2):
                res = await reranker.generate_structured_output([UserMsg("user", q)], structured_model=Ids)
            return str(res.content)
        except TimeoutError:
            return "reranker too slow: vector order"
        finally:
            release.set()
            await asyncio.to_thread(locker.join, 5)
            await asyncio.sleep(0.2)

    base = ScriptedModel([calls(("lookup", {"q": "a"})), text("done"), text("second")], model="base")
    h = Harness(HarnessConfig(store=store, rate_limits=[RateLimit(scope="principal", calls_per_min=3)]),
                load_entry_points=False, environ={})
    agent = make_agent(base, [lookup], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "look it up")
    first = h.last_report(agent)
    assert reranker.calls == [] and len(base.calls) == 2, (len(reranker.calls), len(base.calls))
    assert first.terminal_state.value == "completed"

    with h.acting_for(ALICE):
        _, final = await run(agent, "hi again")  # the 3rd call of the minute: 3 allowed
    report = h.last_report(agent)
    got = (report.terminal_state.value, report.reason, final.get_text_content())
    assert report.terminal_state.value == "completed", got

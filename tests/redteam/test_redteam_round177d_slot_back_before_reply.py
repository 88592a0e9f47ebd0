"""Round s177d (an operations team's scenarios, several workers on one Redis): a call's
concurrency slot went back in a background task nobody awaited, so for about a millisecond
after worker A's reply returned, worker B's call of the same tool (one in flight for everyone)
was refused `concurrency_limited` ("1 calls of it are already running"). The worker itself
waited for its own give-backs; another worker could not. README "Running many workers": a
slot "is held as long as its run or call lasts". Now a run's give-backs are back in the store
before its reply returns; round 177 b's red team found the same on a reply that parks for a
human, and a store answering each release slowly (a call under three limits gave them back
one after another, past the wait's bound): they are made together now, and waited for."""
from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from agentscope.tool import Toolkit
from round95_fleet_kit import ACTED, kinds, lookup, store_of
from scripted import ALICE, BOB, ScriptedModel, calls, make_agent, run, text, tool, tool_messages

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import RedisStore


@pytest.mark.parametrize("kind", kinds())
async def test_a_call_slot_is_free_for_another_worker_once_the_reply_returned(kind: str, tmp_path: Path) -> None:
    ACTED.clear()
    store = store_of(kind, tmp_path)()  # one client, its connection made: two agents of one process
    workers = []
    for who, q in ((ALICE, "a"), (BOB, "b")):
        h = Harness(HarnessConfig(store=store, concurrency_limits=[
            ConcurrencyLimit(scope="tool", tool="lookup", max_in_flight=1)]), load_entry_points=False, environ={})
        model = ScriptedModel([calls(("lookup", {"q": q})), text(f"{q} done")])
        agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
        workers.append((who, h, agent))
    replies = []
    for who, h, agent in workers:  # worker A, then worker B right after A's reply returned
        with h.acting_for(who):
            _, final = await run(agent, "look it up")
        replies.append((final.get_text_content(), h.last_report(agent).refusals))
    assert ACTED == [("lookup", "a"), ("lookup", "b")], replies
    assert replies == [("a done", {}), ("b done", {})]


needs_redis = pytest.mark.skipif(not os.environ.get("HARNESS_TEST_REDIS_URL"), reason="needs a redis-server")


class SlowRelease(RedisStore):
    """A remote Redis: each release answers after ``delay`` (well under the store's 2 s bound)."""

    delay = 0.08

    async def lease_release(self, key, lease_id, *, deadline=None):
        await asyncio.sleep(self.delay)
        return await super().lease_release(key, lease_id, deadline=deadline)


async def book(slot: str) -> str:
    """Book a slot.

    Args:
        slot (str): Which.
    """
    return f"booked {slot}"


async def transfer(amount: float) -> str:
    """Transfer money.

    Args:
        amount (float): USD.
    """
    return f"sent {amount}"


async def _reply(h: Harness, script: list) -> tuple[ScriptedModel, object]:
    model = ScriptedModel(list(script))
    agent = make_agent(model, [book, transfer], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "go")
    return model, h.last_report(agent)


@needs_redis
@pytest.mark.parametrize("ending", ["completed", "parked"])
async def test_the_other_workers_call_right_after_a_reply_returns(ending: str) -> None:
    store = SlowRelease(os.environ["HARNESS_TEST_REDIS_URL"], prefix="rt177-" + uuid.uuid4().hex[:8])

    def worker() -> Harness:
        return Harness(HarnessConfig(
            store=store, concurrency_limits=[ConcurrencyLimit(scope="tool", tool="book", max_in_flight=1)],
            tools={"transfer": ToolPolicy(role="mutation", ask_when=lambda args: "needs a human")},
        ), load_entry_points=False, environ={})

    a, b = worker(), worker()
    if ending == "completed":
        script_a = [calls(("book", {"slot": "x"})), text("booked")]
    else:  # the same round books and asks for a transfer: the reply parks on the human
        script_a = [calls(("book", {"slot": "x"}), ("transfer", {"amount": 80})), text("ok")]
    _, report_a = await _reply(a, script_a)
    assert (report_a.terminal_state.value == "waiting_input") == (ending == "parked")
    model_b, _ = await _reply(b, [calls(("book", {"slot": "y"})), text("booked")])
    assert any("booked y" in m for m in tool_messages(model_b.calls[-1])), tool_messages(model_b.calls[-1])


@needs_redis
async def test_a_call_under_three_limits_with_a_slow_store() -> None:
    """Three slots (the tool's, the principal's, the tenant's), each release 0.8 s: all back
    before the reply returns, in about one release's time."""
    store = SlowRelease(os.environ["HARNESS_TEST_REDIS_URL"], prefix="rt177-" + uuid.uuid4().hex[:8])
    store.delay = 0.8
    limits = [ConcurrencyLimit(scope=s, tool="book", max_in_flight=1) for s in ("tool", "principal", "tenant")]

    def worker() -> Harness:
        return Harness(HarnessConfig(store=store, concurrency_limits=limits), load_entry_points=False, environ={})

    loop = asyncio.get_running_loop()
    started = loop.time()
    await _reply(worker(), [calls(("book", {"slot": "x"})), text("booked")])
    took = loop.time() - started
    model_b, _ = await _reply(worker(), [calls(("book", {"slot": "y"})), text("booked")])
    assert any("booked y" in m for m in tool_messages(model_b.calls[-1])), (took, tool_messages(model_b.calls[-1]))
    assert took < 2.0, f"the reply waited {took:.2f} s for three releases of 0.8 s"

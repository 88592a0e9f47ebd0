"""Red team, round 30: running many workers on shared stores.

1. tool ``rate_limits``: what a call that never runs spends of the rate (a
   duplicate refused after the rate gate; a call parked for a human's
   confirmation and judged again on resume);
2. the shared circuit breaker: the fleet's one half-open probe spent on a
   call whose own arguments make the tool fail;
3. the daily quota and ``wait_s`` of a sub-agent run under another
   ``Harness`` (its own quota, its own deadline);
4. concurrency slots given back when a call parks, a caller times out, a
   stream is dropped, a lead is cancelled mid sub-agent; two workers on one
   store (MemoryStore shared, SQLite file, Redis).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s, real stores (the Redis at
``redis://127.0.0.1:6399/1``, under a key prefix of the test's own).
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from hookkit import Ran, refund_fn, refunding, searcher
from scripted import (
    ALICE,
    BOB,
    ScriptedModel,
    calls,
    delegating_tool,
    drain,
    make_agent,
    run,
    text,
    tool,
    tool_messages,
)

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    DependencyDown,
    Harness,
    HarnessConfig,
    Principal,
    RateLimit,
    TerminalState,
)
from agentscope_harness.stores import MemoryStore


def _told(model: ScriptedModel) -> list[str]:
    """The tool results the model read in its last call."""
    return tool_messages(model.calls[-1]) if model.calls else []



def _blocking(ran: Ran, gate: asyncio.Event) -> Any:
    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        await gate.wait()
        return f"found {q}"

    return search


# ====================================================== 1. tool rate limits


async def test_a_duplicate_refused_after_the_rate_gate_does_not_spend_the_tools_rate() -> None:
    ran = Ran()
    limit = RateLimit(scope="principal", tool="search", calls_per_min=2)
    h = Harness(HarnessConfig(rate_limits=[limit]), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "a"})),
                           calls(("search", {"q": "b"})), text("done")])
    agent = make_agent(model, [searcher(ran)], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert report.refusals.get("duplicate_call") == 1  # the attack: the repeat was refused, never ran
    assert [a["q"] for a in ran.of("search")] == ["a", "b"]  # two calls ran: within 2 per minute
    assert "rate_limited" not in report.refusals


async def test_a_confirmed_call_counts_once_against_its_tools_rate() -> None:
    ran = Ran()
    limit = RateLimit(scope="principal", tool="refund", calls_per_min=1)
    h = Harness(HarnessConfig(rate_limits=[limit]), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
        ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]))
    assert ran.of("refund") == [{"order_id": "o-1"}]
    assert not any(m.startswith("[harness:rate_limited]") for m in _told(model))
    assert h.last_report(agent).refusals == {}


async def test_a_tool_call_over_its_rate_waits_within_wait_s_and_runs() -> None:
    """Regression guard: a minute's calls spent (through the store, as
    another worker would), the next call waits 0.1 s (within ``wait_s``) and runs."""
    store = MemoryStore()
    rate = RateLimit(scope="principal", tool="search", calls_per_min=600, wait_s=1.0)
    h = Harness(HarnessConfig(store=store, rate_limits=[rate]), load_entry_points=False)
    assert await store.rate_acquire(f"rate:tool=search:calls:principal:{ALICE.key}", 600, 600) == 0
    ran = Ran()
    model = ScriptedModel([calls(("search", {"q": "a"})), text("done")])
    agent = make_agent(model, [searcher(ran)], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "go")
    assert ran.of("search") == [{"q": "a"}] and h.last_report(agent).refusals == {}


# ====================================================== 2. the shared breaker


def _inventory(ran: Ran, down: list[bool]) -> Any:
    async def inventory(sku: str) -> str:
        """Stock level of a product.

        Args:
            sku (str): The product, e.g. SKU-1.
        """
        ran.append(("inventory", {"sku": sku}))
        if down[0]:
            raise DependencyDown("inventory API", "HTTP 503")
        if not sku.startswith("SKU-"):
            raise ValueError(f"unknown sku {sku!r}")  # the caller's argument, not the dependency
        return f"{sku}: 4 in stock"

    return inventory


async def test_a_probe_failing_on_its_own_arguments_does_not_deny_the_tool_to_the_fleet(
    two_workers: tuple[Any, Any],
) -> None:
    store_a, store_b = two_workers
    cfg = dict(breaker_failures=1, breaker_cooldown_s=0.05)
    w1 = Harness(HarnessConfig(store=store_a, **cfg), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, **cfg), load_entry_points=False)
    ran, down = Ran(), [True]

    async def stock(h: Harness, sku: str, who: Principal) -> Any:
        model = ScriptedModel([calls(("inventory", {"sku": sku})), text("ok")])
        agent = make_agent(model, h.instrument(Toolkit(tools=[tool(_inventory(ran, down))])), h.middlewares())
        with h.acting_for(who):
            await run(agent, "stock?")
        return h.last_report(agent)

    await stock(w1, "SKU-1", ALICE)  # the dependency is down: the breaker opens fleet-wide
    down[0] = False  # it is back
    await asyncio.sleep(0.1)  # the cooldown passed
    await stock(w1, "sku one", ALICE)  # the probe: Alice's own argument is wrong
    assert ran.of("inventory")[-1] == {"sku": "sku one"}
    bob = await stock(w2, "SKU-2", BOB)  # Bob, on the other worker, a moment later
    assert ran.of("inventory")[-1] == {"sku": "SKU-2"}
    assert "dependency_down" not in bob.refusals


# ====================================================== 3. a sub-agent under another Harness


async def test_a_sub_agent_under_a_harness_with_a_daily_quota_is_held_to_it() -> None:
    store = MemoryStore()
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=0.0001, max_output_tokens=100)
    researcher_h = Harness(HarnessConfig(store=store, cost=cost), load_entry_points=False)
    # control: the researcher's Harness on its own makes no model call over the quota
    solo_model = ScriptedModel([text("researched", inp=500, out=100)])
    solo = make_agent(solo_model, [], researcher_h.middlewares(), name="researcher")
    with researcher_h.acting_for(ALICE):
        await run(solo, "go")
    assert solo_model.calls == [] and researcher_h.last_report(solo).reason == "budget"
    # the same researcher as a sub-agent of a lead whose Harness sets no quota
    lead_h = Harness(HarnessConfig(store=store), load_entry_points=False)
    child_model = ScriptedModel([text("researched", inp=500, out=100)])
    child = make_agent(child_model, [], researcher_h.middlewares(), name="researcher")
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"})), text("done")]),
                      [delegating_tool(child)], lead_h.middlewares())
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    spent = await store.get_spend(ALICE.key)
    assert child_model.calls == [] or spent >= researcher_h.last_report(child).spent_usd > 0
    assert spent <= 0.0001


async def test_a_sub_agents_model_call_does_not_wait_for_its_rate_past_its_own_deadline() -> None:
    store = MemoryStore()
    lead_h = Harness(HarnessConfig(store=store, deadline_s=30), load_entry_points=False)
    rate = RateLimit(scope="principal", calls_per_min=60, wait_s=3.0)
    researcher_h = Harness(HarnessConfig(store=store, deadline_s=0.4, rate_limits=[rate]), load_entry_points=False)
    # another worker spent this minute's model calls: the next one may go in 1 s
    assert await store.rate_acquire(f"rate:model:calls:principal:{ALICE.key}", 60, 60) == 0
    child_model = ScriptedModel([text("researched")])
    child = make_agent(child_model, [], researcher_h.middlewares(), name="researcher")
    delegate, took = delegating_tool(child), []

    async def research(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        started = time.monotonic()
        try:
            return await delegate(task)
        finally:
            took.append(time.monotonic() - started)

    lead = make_agent(ScriptedModel([calls(("research", {"task": "t"})), text("done")]), [research],
                      lead_h.middlewares())
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    report = researcher_h.last_report(child)
    assert took[0] < 0.8  # its deadline (0.4 s) plus slack, not the 1 s wait
    assert child_model.calls == [] and report.terminal_state == TerminalState.INCOMPLETE


async def test_control_a_root_runs_model_call_does_not_wait_past_its_deadline() -> None:
    store = MemoryStore()
    rate = RateLimit(scope="principal", calls_per_min=60, wait_s=3.0)
    h = Harness(HarnessConfig(store=store, deadline_s=0.4, rate_limits=[rate]), load_entry_points=False)
    assert await store.rate_acquire(f"rate:model:calls:principal:{ALICE.key}", 60, 60) == 0
    model = ScriptedModel([text("hello")])
    agent = make_agent(model, [], h.middlewares())
    started = time.monotonic()
    with h.acting_for(ALICE):
        await run(agent, "go")
    assert time.monotonic() - started < 0.8
    assert model.calls == [] and h.last_report(agent).reason == "rate_limited"


# ====================================================== 4. slots given back


async def test_a_parked_call_gives_its_tool_slot_back_and_takes_it_again_on_resume() -> None:
    ran, store = Ran(), MemoryStore()
    limit = ConcurrencyLimit(scope="tool", tool="refund", max_in_flight=1)
    h = Harness(HarnessConfig(store=store, concurrency_limits=[limit]), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    other = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-9"})), text("x")]),
                       h.instrument(Toolkit(tools=[tool(refund_fn(ran))])), h.middlewares(), name="other")
    with h.acting_for(BOB):  # while Alice's refund waits for her, Bob's runs
        await run(other, "refund o-9")
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]))
    assert ran.of("refund") == [{"order_id": "o-9"}, {"order_id": "o-1"}]
    assert await store.lease_acquire("calls:refund:tool:*", 1, 60) is not None


async def test_a_reply_its_caller_timed_out_gives_its_run_slot_back(two_workers: tuple[Any, Any]) -> None:
    store_a, store_b = two_workers
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1)
    w1 = Harness(HarnessConfig(store=store_a, concurrency_limits=[limit]), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, concurrency_limits=[limit]), load_entry_points=False)
    ran, gate = Ran(), asyncio.Event()
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("x")]), [_blocking(ran, gate)],
                       w1.middlewares())
    busy = make_agent(ScriptedModel([text("too soon")]), [], w2.middlewares(), name="busy")
    with w1.acting_for(ALICE):
        task = asyncio.create_task(agent.reply(UserMsg("user", "go")))
        while not ran:
            await asyncio.sleep(0.005)
    with w2.acting_for(ALICE):  # the other worker sees the slot taken
        await run(busy, "again")
    assert w2.last_report(busy).reason == "concurrency_limited"
    try:
        await asyncio.wait_for(task, 0.05)  # a web handler's own timeout
    except TimeoutError:
        pass
    later = make_agent(ScriptedModel([text("hello")]), [], w2.middlewares(), name="later")
    with w2.acting_for(ALICE):
        _, final = await run(later, "again")
    assert final.get_text_content() == "hello"


async def test_a_dropped_stream_gives_its_run_slot_back_to_another_agent() -> None:
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1)
    h = Harness(HarnessConfig(concurrency_limits=[limit]), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("a long answer " * 20)]), [], h.middlewares())
    with h.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "go"))
        await stream.__anext__()
        del stream  # the browser tab closed
    gc.collect()
    for _ in range(20):
        await asyncio.sleep(0.005)
    assert h.last_report(agent).terminal_state == TerminalState.CANCELLED
    other = make_agent(ScriptedModel([text("hello")]), [], h.middlewares(), name="other")
    with h.acting_for(ALICE):
        _, final = await run(other, "again")
    assert final.get_text_content() == "hello"


async def test_a_cancelled_lead_gives_back_its_sub_agents_tool_slot() -> None:
    store = MemoryStore()
    limit = ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)
    h = Harness(HarnessConfig(store=store, concurrency_limits=[limit]), load_entry_points=False)
    ran, gate = Ran(), asyncio.Event()
    child = make_agent(ScriptedModel([calls(("search", {"q": "deep"})), text("r")]), [_blocking(ran, gate)],
                       h.middlewares(), name="researcher")
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"})), text("done")]),
                      [delegating_tool(child)], h.middlewares())
    with h.acting_for(ALICE):
        task = asyncio.create_task(lead.reply(UserMsg("user", "go")))
        while not ran:
            await asyncio.sleep(0.001)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert await store.lease_acquire("calls:search:tool:*", 1, 60) is not None


async def test_two_workers_share_one_principals_daily_quota(two_workers: tuple[Any, Any]) -> None:
    """Regression guard: what one worker spent, the other cannot spend again."""
    store_a, store_b = two_workers
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=0.1, max_output_tokens=100)
    w1 = Harness(HarnessConfig(store=store_a, cost=cost), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, cost=cost), load_entry_points=False)
    first = make_agent(ScriptedModel([text("one", inp=200, out=100)]), [], w1.middlewares())
    with w1.acting_for(ALICE):  # $0.03 of $0.10
        await run(first, "go")
    assert await store_b.get_spend(ALICE.key) == pytest.approx(0.03)
    # the other worker: $0.07 left, and the call's reservation (8k input + 100 output tokens) is more
    second_model = ScriptedModel([text("two", inp=200, out=100)])
    second = make_agent(second_model, [], w2.middlewares(), name="second")
    with w2.acting_for(ALICE):
        await run(second, "x" * 3000)
    assert second_model.calls == [] and w2.last_report(second).reason == "budget"
    with w2.acting_for(BOB):  # Bob's quota is his own
        await run(make_agent(ScriptedModel([text("hi", inp=200, out=100)]), [], w2.middlewares(), name="bob"), "go")
    assert await store_a.get_spend(BOB.key) == pytest.approx(0.03)

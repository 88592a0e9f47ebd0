"""Red team, round 31: the round-30 fleet fixes, attacked from the user's side.

1. tool ``rate_limits`` given back by a call that did not run
   (``rate_refund``): a call admitted and then dropped before it ran (the
   caller closed its stream at the call's start event), a unit given back
   after the bucket refilled and another worker drained it, a parallel batch
   of confirmed calls, a call cancelled while a later gate decides;
2. the half-open probe: claimed by a call that is then abandoned before it
   runs; a probe failing on its own arguments while the dependency is still
   down (a malicious caller closing the breaker: the breaker opens again);
3. the daily quota of a sub-agent's Harness read into the root run: what
   it does to its lead (a Harness keeping none, an enforcing lead under a
   shadow sub-agent), a store keeping the daily spend alone;
4. an interrupted client call's slot freed, under a candidate policy equal
   to the live one;
5. a client-answered prerequisite and a refund the model chose in the same
   turn, the reply resumed in another process (state restored).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s, real stores (the Redis at
``redis://127.0.0.1:6399/1``, under a key prefix of the test's own).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    ToolResultStartEvent,
    UserConfirmResultEvent,
)
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit
from hookkit import Ran, searcher
from scripted import ALICE, BOB, ScriptedModel, calls, client_tool, delegating_tool, drain, make_agent, run, text, tool

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    DependencyDown,
    Harness,
    HarnessConfig,
    HookContext,
    InvalidArguments,
    Prerequisite,
    RateLimit,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.stores import MemoryStore

CAROL = ALICE.model_copy(update={"user_id": "u-9"})




async def _dropped_at_its_start(agent: Any, prompt: str = "go") -> None:
    """The caller reads the stream up to the tool call's start event (the
    call is admitted: AgentScope runs it on the next read), then closes it:
    a browser tab closed, a handler's timeout."""
    stream = agent.reply_stream(UserMsg("user", prompt))
    async for event in stream:
        if isinstance(event, ToolResultStartEvent):
            break
    await stream.aclose()


def _refund_tool(ran: Ran, **kw: Any) -> FunctionTool:
    """A permitted ``refund`` run one at a time (a sequential batch)."""

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    return tool(refund, is_concurrency_safe=False, **kw)


# ====================================================== 1. rate units given back


async def test_a_call_dropped_before_it_ran_gives_its_rate_unit_back(two_workers: tuple[Any, Any]) -> None:
    store_a, store_b = two_workers
    rate = RateLimit(scope="principal", tool="refund", calls_per_min=1)
    w1 = Harness(HarnessConfig(store=store_a, rate_limits=[rate]), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, rate_limits=[rate]), load_entry_points=False)
    ran = Ran()
    first = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")]),
                       [_refund_tool(ran)], w1.middlewares())
    with w1.acting_for(ALICE):
        await _dropped_at_its_start(first)
    await asyncio.sleep(0.05)  # the settled run's slots go back in the background
    assert ran == [] and w1.last_report(first).terminal_state.value == "cancelled"
    again = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")]),
                       [_refund_tool(ran)], w2.middlewares(), name="again")
    with w2.acting_for(ALICE):  # she asks again, on the other worker
        await run(again, "refund o-1")
    assert ran.of("refund") == [{"order_id": "o-1"}]
    assert "rate_limited" not in w2.last_report(again).refusals


async def test_control_a_call_dropped_before_it_ran_gives_its_concurrency_slot_back() -> None:
    """Regression guard beside the attack above: the slot (not the unit) is back."""
    store = MemoryStore()
    limit = ConcurrencyLimit(scope="tool", tool="refund", max_in_flight=1)
    h = Harness(HarnessConfig(store=store, concurrency_limits=[limit]), load_entry_points=False)
    ran = Ran()
    first = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")]),
                       [_refund_tool(ran)], h.middlewares())
    with h.acting_for(ALICE):
        await _dropped_at_its_start(first)
    await asyncio.sleep(0.05)
    assert ran == [] and await store.lease_acquire("calls:refund:tool:*", 1, 60) is not None


class _Clock:
    """The shared store's clock (``MemoryStore(clock=...)``): a minute can pass in a test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_unit_given_back_after_the_bucket_refilled_grants_no_second_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time as real_time

    import agentscope_harness.fleet as fleet_module

    clock = _Clock()
    store = MemoryStore(clock=clock)

    class _FleetTime:  # the fleet reads the same fake minute as the store
        def __getattr__(self, name: str) -> Any:
            return getattr(real_time, name)

        def monotonic(self) -> float:
            return clock()

    monkeypatch.setattr(fleet_module, "time", _FleetTime())
    rate = RateLimit(scope="tool", tool="refund", calls_per_min=1)
    gate, looking = asyncio.Event(), asyncio.Event()

    async def slow_lookup(args: dict[str, Any]) -> str | None:  # the approval rule looks the order up
        looking.set()
        await gate.wait()
        return "refunds of this order need a human"

    tools = {"refund": ToolPolicy(ask_when=lambda a: slow_lookup(a) if a["order_id"] == "o-big" else None)}
    h = Harness(HarnessConfig(store=store, rate_limits=[rate], tools=tools, hook_timeout_s=10),
                load_entry_points=False)
    ran = Ran()

    def shop(order: str, name: str) -> Any:
        model = ScriptedModel([calls(("refund", {"order_id": order})), text("ok")])
        return make_agent(model, [_refund_tool(ran)], h.middlewares(), name=name)

    alice = shop("o-big", "alice")
    with h.acting_for(ALICE):  # takes the minute's unit at t=0, then its approval rule looks the order up
        parked = asyncio.create_task(drain(alice, UserMsg("user", "refund o-big")))
        await asyncio.wait_for(looking.wait(), 2)
    clock.now += 61  # the lookup is slow: the bucket refilled (at calls_per_min=30 a 2 s lookup is enough)
    bob = shop("o-2", "bob")
    with h.acting_for(BOB):
        await run(bob, "refund o-2")  # Bob takes the fresh unit at t=61
    gate.set()
    events = await parked  # Alice's call parks for a human: it gives its unit back
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)
    await asyncio.sleep(0.01)
    carol = shop("o-3", "carol")
    with h.acting_for(CAROL):
        await run(carol, "refund o-3")  # still t=61: one call of refund per minute, and Bob's ran
    assert ran.of("refund") == [{"order_id": "o-2"}]
    assert h.last_report(carol).refusals == {"rate_limited": 1}


async def test_a_parallel_batch_of_confirmed_calls_runs_within_its_rate() -> None:
    """Regression guard: two refunds of one concurrent batch parked by
    ``ask_when`` give their units back when parked and take them again on
    confirmation: both run under ``calls_per_min=2``, and a third is refused."""
    ran = Ran()

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    rate = RateLimit(scope="principal", tool="refund", calls_per_min=2)
    tools = {"refund": ToolPolicy(ask_when=lambda a: "refunds need a human")}
    h = Harness(HarnessConfig(rate_limits=[rate], tools=tools), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"}), ("refund", {"order_id": "o-2"})),
                           text("Refunded both."), calls(("refund", {"order_id": "o-3"})), text("no")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1 and o-2"))
        shown = [c for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls]
        assert len(shown) == 2 and ran == []
        await drain(agent, UserConfirmResultEvent(reply_id=agent.state.reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=c) for c in shown]))
        assert sorted(a["order_id"] for a in ran.of("refund")) == ["o-1", "o-2"]
        assert h.last_report(agent).refusals == {}
        await drain(agent, UserMsg("user", "and o-3"))
    assert h.last_report(agent).refusals == {"rate_limited": 1} and len(ran.of("refund")) == 2


async def test_a_call_cancelled_while_a_later_gate_decides_gives_its_unit_back(two_workers: tuple[Any, Any]) -> None:
    """Regression guard: the unit taken by ``spend_gate`` comes back when the
    caller cancels during a slower gate after it (a house hook at priority 45)."""
    store_a, store_b = two_workers
    rate = RateLimit(scope="principal", tool="refund", calls_per_min=1)
    entered = asyncio.Event()

    @harness_hook("pre_tool_call", priority=45, name="house_fraud_check", kind="safety")
    async def house_fraud_check(ctx: HookContext) -> None:
        entered.set()
        await asyncio.sleep(5)

    w1 = Harness(HarnessConfig(store=store_a, rate_limits=[rate]), hooks=[house_fraud_check],
                 load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, rate_limits=[rate]), load_entry_points=False)
    ran = Ran()
    first = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("x")]),
                       [_refund_tool(ran)], w1.middlewares())
    with w1.acting_for(ALICE):
        task = asyncio.create_task(first.reply(UserMsg("user", "go")))
        await asyncio.wait_for(entered.wait(), 2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.05)
    again = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")]),
                       [_refund_tool(ran)], w2.middlewares(), name="again")
    with w2.acting_for(ALICE):
        await run(again, "go")
    assert ran.of("refund") == [{"order_id": "o-1"}]


# ====================================================== 2. the half-open probe


def _inventory(ran: Ran, down: list[bool]) -> Any:
    async def inventory(sku: str) -> str:
        """Stock level of a product.

        Args:
            sku (str): The product, e.g. SKU-1.
        """
        if not sku.startswith("SKU-"):  # checked before the dependency is asked
            raise InvalidArguments(f"unknown sku {sku!r}")
        ran.append(("inventory", {"sku": sku}))  # the dependency is asked
        if down[0]:
            raise DependencyDown("inventory API", "HTTP 503")
        return f"{sku}: 4 in stock"

    return inventory


def _stock_agent(h: Harness, ran: Ran, down: list[bool], sku: str, name: str) -> Any:
    model = ScriptedModel([calls(("inventory", {"sku": sku})), text("ok")])
    toolkit = h.instrument(Toolkit(tools=[tool(_inventory(ran, down), is_concurrency_safe=False)]))
    return make_agent(model, toolkit, h.middlewares(), name=name)


async def test_an_abandoned_probe_does_not_keep_a_recovered_tool_from_the_fleet(
    two_workers: tuple[Any, Any],
) -> None:
    store_a, store_b = two_workers
    cfg = dict(breaker_failures=1, breaker_cooldown_s=0.05)
    w1 = Harness(HarnessConfig(store=store_a, **cfg), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, **cfg), load_entry_points=False)
    ran, down = Ran(), [True]
    with w1.acting_for(ALICE):  # the dependency is down: the breaker opens fleet-wide
        await run(_stock_agent(w1, ran, down, "SKU-1", "a"), "stock?")
    down[0] = False  # it is back
    await asyncio.sleep(0.1)  # the cooldown passed
    with w1.acting_for(ALICE):  # Alice's call is the probe; she closes the tab before it runs
        await _dropped_at_its_start(_stock_agent(w1, ran, down, "SKU-1", "b"))
    await asyncio.sleep(0.2)  # four cooldowns later
    bob = _stock_agent(w2, ran, down, "SKU-2", "bob")
    with w2.acting_for(BOB):
        await run(bob, "stock?")
    assert ran.of("inventory")[-1] == {"sku": "SKU-2"}
    assert "dependency_down" not in w2.last_report(bob).refusals


async def test_a_probe_failing_on_its_own_arguments_while_the_dependency_is_down_reopens_it(
    two_workers: tuple[Any, Any],
) -> None:
    """Regression guard on fix 2 as a malicious caller uses it: Mallory's
    probe with a bad sku closes the breaker while the inventory API is still
    down (as documented: the tool answered); the next real call fails on the
    dependency and opens it again, so every later call is refused, not sent."""
    store_a, store_b = two_workers
    cfg = dict(breaker_failures=1, breaker_cooldown_s=0.4)  # the calls below fit in it
    w1 = Harness(HarnessConfig(store=store_a, **cfg), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, **cfg), load_entry_points=False)
    ran, down = Ran(), [True]
    with w1.acting_for(ALICE):
        await run(_stock_agent(w1, ran, down, "SKU-1", "a"), "stock?")
    await asyncio.sleep(0.45)
    with w1.acting_for(CAROL):  # the probe, on a bad argument: the dependency is not asked
        await run(_stock_agent(w1, ran, down, "bad sku", "mallory"), "stock?")
    assert len(ran) == 1
    with w2.acting_for(BOB):  # closed: Bob's call reaches the dependency, which is down
        await run(_stock_agent(w2, ran, down, "SKU-2", "bob"), "stock?")
    assert len(ran) == 2
    for who, name in ((ALICE, "x"), (BOB, "y"), (CAROL, "z")):
        agent = _stock_agent(w2 if who is BOB else w1, ran, down, "SKU-3", name)
        h = w2 if who is BOB else w1
        with h.acting_for(who):
            await run(agent, "stock?")
        assert h.last_report(agent).refusals.get("dependency_down") == 1
    assert len(ran) == 2  # open again: none of them reached the dependency


# ====================================================== 3. a sub-agent's daily quota


@pytest.mark.parametrize("sub_mode", ["enforce", "shadow"])
async def test_a_lead_is_not_held_to_its_sub_agents_harness_daily_quota(sub_mode: str) -> None:
    store = MemoryStore()
    prices = {"scripted": (100.0, 100.0)}
    researcher_h = Harness(HarnessConfig(store=store, mode=sub_mode,
                                         cost=CostPolicy(prices=prices, daily_quota_usd=0.1)),
                           load_entry_points=False)
    lead_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=prices, cap_usd=10.0)),
                     load_entry_points=False)
    ran = Ran()
    child = make_agent(ScriptedModel([text("researched", inp=200, out=100)]), [], researcher_h.middlewares(),
                       name="researcher")
    script = [calls(("delegate", {"task": "t"}), inp=200, out=100)]
    script += [calls(("search", {"q": f"q{i}"}), inp=200, out=100) for i in range(6)]
    lead_model = ScriptedModel([*script, text("Here is the report.", inp=200, out=100)])
    lead = make_agent(lead_model, [delegating_tool(child), searcher(ran)], lead_h.middlewares())
    with lead_h.acting_for(ALICE):
        _, final = await run(lead, "research and report")
    report = lead_h.last_report(lead)
    assert report.spent_usd < 10.0
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert final.get_text_content() == "Here is the report."


async def test_control_the_same_lead_without_the_sub_agent_completes() -> None:
    """Control of the attack above: the lead's own policy lets it finish."""
    store = MemoryStore()
    prices = {"scripted": (100.0, 100.0)}
    lead_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=prices, cap_usd=10.0)),
                     load_entry_points=False)
    ran = Ran()
    script = [calls(("search", {"q": f"q{i}"}), inp=200, out=100) for i in range(7)]
    lead = make_agent(ScriptedModel([*script, text("Here is the report.", inp=200, out=100)]),
                      [searcher(ran)], lead_h.middlewares())
    with lead_h.acting_for(ALICE):
        await run(lead, "research and report")
    assert lead_h.last_report(lead).reason == "answered"


class _DailySpendOnly:
    """A custom store keeping the daily spend alone (a 0.1 ``SpendStore``)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def get_spend(self, key: str, day: str | None = None, *, deadline: float | None = None) -> float:
        return await self.inner.get_spend(key, day)

    async def add_spend(self, key: str, usd: float, day: str | None = None, *,
                        deadline: float | None = None) -> float:
        return await self.inner.add_spend(key, usd, day)


def _researcher(store: Any, ran: Ran) -> tuple[Harness, Any, ScriptedModel]:
    """A researcher under a Harness keeping a $0.05 daily quota; each of its
    six model calls costs $0.03."""
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=0.05)
    h = Harness(HarnessConfig(store=store, cost=cost), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": q}), inp=200, out=100) for q in "abcde"]
                          + [text("researched", inp=200, out=100)])
    return h, make_agent(model, [searcher(ran)], h.middlewares(), name="researcher"), model


async def test_control_a_researcher_on_a_spend_store_overshoots_its_quota_by_one_call() -> None:
    store = _DailySpendOnly()
    h, researcher, model = _researcher(store, Ran())
    with h.acting_for(ALICE):
        await run(researcher, "go")
    assert len(model.calls) == 2 and h.last_report(researcher).reason == "budget"
    assert await store.get_spend(ALICE.key) == pytest.approx(0.06)


async def test_a_sub_agent_on_a_spend_store_overshoots_its_harness_quota_by_one_call_at_most() -> None:
    store = _DailySpendOnly()
    researcher_h, researcher, model = _researcher(store, Ran())
    lead_h = Harness(HarnessConfig(store=store), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"})), text("done")]),
                      [delegating_tool(researcher)], lead_h.middlewares())
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    assert await store.get_spend(ALICE.key) <= 0.05 + 0.03 + 1e-9
    assert len(model.calls) <= 2 and researcher_h.last_report(researcher).reason == "budget"


# ====================================================== 4. an interrupted client call, a candidate


async def test_a_candidate_equal_to_the_live_policy_agrees_after_an_interrupted_client_call() -> None:
    limit = ConcurrencyLimit(scope="tool", tool="verify_code", max_in_flight=1)
    config = HarnessConfig(concurrency_limits=[limit])
    h = Harness(config, candidate=config, load_entry_points=False)
    model = ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("verify_code", {"code": "1234"})),
                           text("asked again")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "check my code 1234"))
        asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        done = ToolResultBlock(id=asked.id, name=asked.name, output="the app was closed", state="interrupted")
        events = await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                                  execution_results=[done]))
    assert any(isinstance(e, RequireExternalExecutionEvent) for e in events)  # the live policy asked again
    assert h.last_report(agent).candidate_differences == []


# ====================================================== 5. a same-turn prerequisite, restored elsewhere


def _verified_refunds(ran: Ran, script: list[Any] | None = None, **kw: Any) -> tuple[Harness, Any, Any]:
    policy = ToolPolicy(role="mutation", requires=[Prerequisite(tool="verify_code")])
    h = Harness(HarnessConfig(tools={"refund": policy}), load_entry_points=False)
    model = kw.pop("model", None) or ScriptedModel(script or [])
    toolkit = h.instrument(Toolkit(tools=[client_tool(), _refund_tool(ran)]))
    return h, make_agent(model, toolkit, h.middlewares(), **kw), model


async def test_a_same_turn_refund_is_refused_when_the_reply_resumes_in_another_process() -> None:
    from agentscope.state import AgentState

    ran = Ran()
    h1, agent1, model = _verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"}), ("refund", {"order_id": "A-1"})), text("Could not refund."),
    ])
    with h1.acting_for(ALICE):
        events = await drain(agent1, UserMsg("user", "refund A-1, code 1234"))
    asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    state = AgentState.model_validate_json(agent1.state.model_dump_json())
    h2, agent2, _ = _verified_refunds(ran, model=model, state=state)  # another worker
    done = ToolResultBlock(id=asked.id, name=asked.name, output="code checked", state="success")
    with h2.acting_for(ALICE):
        await drain(agent2, ExternalExecutionResultEvent(reply_id=agent2.state.reply_id, execution_results=[done]))
    assert ran == []
    assert h2.last_report(agent2).refusals == {"prerequisite_missing": 1}


async def test_control_a_same_turn_refund_is_refused_when_the_reply_resumes_here() -> None:
    ran = Ran()
    h, agent, _ = _verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"}), ("refund", {"order_id": "A-1"})), text("Could not refund."),
    ])
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund A-1, code 1234"))
        asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        done = ToolResultBlock(id=asked.id, name=asked.name, output="code checked", state="success")
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[done]))
    assert ran == [] and h.last_report(agent).refusals == {"prerequisite_missing": 1}

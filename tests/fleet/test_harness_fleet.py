"""The fleet wired into the harness, in one process (MemoryStore, a real
Agent, the scripted model): spend reservations keep concurrent runs under
the daily quota, rate and concurrency limits refuse with their sentinels,
shared breakers fall back to local state when the store fails, and
budgets and limits fail closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import ALLOW, STORE_DOWN, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    Principal,
    RateLimit,
    TerminalState,
)
from agentscope_harness.errors import DependencyDown
from agentscope_harness.fleet import estimate_input_tokens, max_output_tokens
from agentscope_harness.stores import MemoryStore

U42 = Principal(user_id="u-42", tenant="acme")
U7 = Principal(user_id="u-7", tenant="acme")


class SlowModel(ScriptedModel):
    """A scripted model whose calls take a moment, so concurrent runs
    overlap between a call's reservation and its settlement."""

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.005)
        return await super()._call_api(*args, **kwargs)


def shop(executed: list[str], gate: asyncio.Event | None = None, delay: float = 0.0) -> list[Any]:
    from agentscope.tool import FunctionTool

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        executed.append(q)
        if delay:
            await asyncio.sleep(delay)
        if gate is not None:
            await gate.wait()
        return f"found {q}"

    return [FunctionTool(search, permission=ALLOW)]


async def reply(h: Harness, agent: Any, principal: Principal) -> tuple[str, Any]:
    with h.acting_for(principal):
        _, final = await run(agent, "go")
    return final.get_text_content() or "", h.last_report(agent)


# ------------------------------------------------------------ reservations


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.integers(2, 8), rounds=st.integers(1, 4), calls_fit=st.integers(1, 12))
async def test_concurrent_runs_of_one_principal_never_spend_past_the_quota(runs, rounds, calls_fit):
    store = MemoryStore()
    price = (2.0, 8.0)  # USD per million tokens
    executed: list[str] = []
    probe = SlowModel([text("x")])
    cost = CostPolicy(prices={"scripted": price}, daily_quota_usd=1.0, max_output_tokens=100)
    h = Harness(HarnessConfig(cost=cost, store=store), load_entry_points=False)
    # one call's reservation, measured on a real first call, sizes the quota; the
    # scripted calls cost less than their estimate (50 tokens in, 90 of at most 100 out)
    agent = make_agent(probe, shop(executed), h.middlewares())
    await reply(h, agent, Principal(user_id="sizer"))
    turn = probe.calls[0]
    estimate = (price[0] * estimate_input_tokens(turn.messages, turn.tools or [])
                + price[1] * max_output_tokens(probe, h.config)) / 1e6
    quota = estimate * calls_fit
    h = Harness(HarnessConfig(cost=cost.model_copy(update={"daily_quota_usd": quota}), store=store),
                load_entry_points=False)

    def script() -> list[Any]:
        return [calls(("search", {"q": f"r{i}"}), inp=50, out=90) for i in range(rounds - 1)] + [
            text("done", inp=50, out=90)]

    models = [SlowModel(script()) for _ in range(runs)]
    agents = [make_agent(m, shop(executed), h.middlewares()) for m in models]
    outcomes = await asyncio.gather(*(reply(h, a, U42) for a in agents))

    spent = await store.get_spend(U42.key)
    assert spent <= quota + 1e-12  # the store's committed spend
    assert sum(r.spent_usd for _, r in outcomes) <= quota + 1e-12  # what the runs report
    made = sum(len(m.calls) for m in models)
    assert made >= min(calls_fit, runs)  # the first round fits side by side
    stopped = [r for _, r in outcomes if r.reason == "budget"]
    if made < runs * rounds:
        assert stopped and all(r.terminal_state == TerminalState.INCOMPLETE for r in stopped)
        assert all(answer.startswith(cost.fallback_text) for answer, r in outcomes if r.reason == "budget")
    # every reservation was settled: the rest of the quota is free again
    assert await store.reserve_spend(U42.key, quota - spent, quota) is not None


async def test_a_failed_model_call_releases_its_reservation():
    store = MemoryStore()
    cost = CostPolicy(prices={"scripted": (2.0, 8.0)}, daily_quota_usd=1.0)
    h = Harness(HarnessConfig(cost=cost, store=store, model_error_text="down ({reason})"),
                load_entry_points=False)
    model = ScriptedModel([ConnectionError("provider down")])
    agent = make_agent(model, [], h.middlewares())
    try:
        await reply(h, agent, U42)
    except ConnectionError:
        pass
    assert await store.get_spend(U42.key) == 0.0
    assert await store.reserve_spend(U42.key, 1.0, 1.0) is not None  # nothing still held


# ------------------------------------------------------------ rate limits


async def test_model_calls_over_the_rate_end_the_run_rate_limited():
    limit = RateLimit(scope="principal", calls_per_min=2)
    h = Harness(HarnessConfig(rate_limits=[limit]), load_entry_points=False)
    executed: list[str] = []
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("never")])
    answer, report = await reply(h, make_agent(model, shop(executed), h.middlewares()), U42)
    assert len(model.calls) == 2 and executed == ["a", "b"]
    assert report.terminal_state == TerminalState.INCOMPLETE and report.reason == "rate_limited"
    assert "too many requests" in answer
    stop = [d for d in report.decisions if d.code == "rate_limited"]
    assert stop and "can run again in" in stop[0].detail
    # another principal has a rate of its own
    other = ScriptedModel([text("hello")])
    answer2, report2 = await reply(h, make_agent(other, [], h.middlewares()), U7)
    assert answer2 == "hello" and report2.terminal_state == TerminalState.COMPLETED


async def test_tool_calls_over_the_rate_are_refused_saying_when_to_retry():
    limit = RateLimit(scope="tool", tool="search", calls_per_min=2)
    h = Harness(HarnessConfig(rate_limits=[limit]), load_entry_points=False)
    executed: list[str] = []
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("ok")])
    _, report = await reply(h, make_agent(model, shop(executed), h.middlewares()), U42)
    assert executed == ["a", "b"]
    told = [m for m in _tool_results(model) if m.startswith("[harness:rate_limited]")]
    assert len(told) == 1 and "can run again in" in told[0]
    assert report.refusals == {"rate_limited": 1}
    # the limit is everyone's: another principal is refused too
    model2 = ScriptedModel([calls(("search", {"q": "d"})), text("ok")])
    await reply(h, make_agent(model2, shop(executed), h.middlewares()), U7)
    assert executed == ["a", "b"]


async def test_a_token_rate_larger_than_one_call_refuses_at_once():
    limit = RateLimit(scope="tenant", tokens_per_min=50, wait_s=30)
    h = Harness(HarnessConfig(rate_limits=[limit]), load_entry_points=False)
    model = ScriptedModel([text("never")])
    answer, report = await reply(h, make_agent(model, [], h.middlewares()), U42)
    assert model.calls == [] and report.reason == "rate_limited"
    assert any("never" in d.detail for d in report.decisions if d.code == "rate_limited")


# ------------------------------------------------------------ concurrency


async def test_runs_over_the_concurrency_limit_end_at_once_and_slots_come_back():
    limit = ConcurrencyLimit(scope="principal", max_in_flight=2)
    store = MemoryStore()
    h = Harness(HarnessConfig(concurrency_limits=[limit], store=store), load_entry_points=False)
    executed: list[str] = []
    gate = asyncio.Event()
    models = [ScriptedModel([calls(("search", {"q": f"r{i}"})), text(f"done {i}")]) for i in range(4)]
    agents = [make_agent(m, shop(executed, gate), h.middlewares()) for m in models]
    tasks = [asyncio.create_task(reply(h, a, U42)) for a in agents]
    while len(executed) < 2 or sum(t.done() for t in tasks) < 2:
        await asyncio.sleep(0.001)
    gate.set()
    outcomes = await asyncio.gather(*tasks)
    done = [r for _, r in outcomes if r.terminal_state == TerminalState.COMPLETED]
    limited = [(a, r) for a, r in outcomes if r.reason == "concurrency_limited"]
    assert len(done) == 2 and len(limited) == 2 and len(executed) == 2
    assert all("too many requests are already running" in a for a, _ in limited)
    assert sum(len(m.calls) for m in models) == 4  # the limited runs never called the model
    # all slots freed: two more runs fit, one of them cancelled mid-run
    gate2 = asyncio.Event()
    cancelled = asyncio.create_task(reply(h, make_agent(
        ScriptedModel([calls(("search", {"q": "c"})), text("x")]), shop(executed, gate2),
        h.middlewares()), U42))
    while "c" not in executed:
        await asyncio.sleep(0.001)
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert await store.lease_acquire("runs:principal:acme/u-42", 2, 60) is not None
    assert await store.lease_acquire("runs:principal:acme/u-42", 2, 60) is not None


async def test_a_tool_over_its_concurrency_limit_is_refused_and_its_slot_freed():
    limit = ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)
    store = MemoryStore()
    h = Harness(HarnessConfig(concurrency_limits=[limit], store=store), load_entry_points=False)
    executed: list[str] = []
    model = ScriptedModel([calls(("search", {"q": "a"}), ("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("ok")])
    _, report = await reply(h, make_agent(model, shop(executed, delay=0.02), h.middlewares()), U42)
    busy = [m for m in _tool_results(model) if m.startswith("[harness:concurrency_limited]")]
    assert executed == ["a", "c"] and len(busy) == 1  # b ran beside a; c after a was shaped
    assert "1 calls of it are already running" in busy[0]
    assert report.refusals == {"concurrency_limited": 1}
    assert await store.lease_acquire("calls:search:tool:*", 1, 60) is not None


# ------------------------------------------------------------ store failures


class Failing(MemoryStore):
    """A MemoryStore whose named methods raise DependencyDown while ``down``."""

    def __init__(self, *names: str) -> None:
        super().__init__()
        self.names, self.down = set(names), True

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in super().__getattribute__("names") and super().__getattribute__("down"):
            async def fail(*args: Any, **kwargs: Any) -> Any:
                raise DependencyDown("store", "connection refused")
            return fail
        return attr


async def test_money_spent_is_charged_even_when_its_settle_fails():
    """Red team: a settle the store did not take was dropped; once the
    call's hold lapsed (600 s) the quota was whole again and the principal
    spent past it. A settle is retried, and one that still fails is made
    again before that principal's next reservation."""
    now = [1000.0]
    store = Failing("settle_spend")
    store._clock = lambda: now[0]
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=0.1, max_output_tokens=100)
    h = Harness(HarnessConfig(store=store, cost=cost), load_entry_points=False)
    first = ScriptedModel([text("one", inp=200, out=100)])
    await reply(h, make_agent(first, [], h.middlewares()), U42)
    now[0] += 601
    store.down = False
    second = ScriptedModel([text("two", inp=200, out=100)])
    await reply(h, make_agent(second, [], h.middlewares()), U42)
    assert await store.get_spend(U42.key) == pytest.approx(2 * 300 * 100.0 / 1e6)


async def _stream_stopped_reading(*replies: Any) -> tuple[Harness, MemoryStore, Any, Any]:
    """A principal's streamed reply (2,000 characters) read to 1,700 and no
    further: the harness, its store, the agent and the open stream."""
    from agentscope.event import TextBlockDeltaEvent
    from agentscope.message import UserMsg

    store = MemoryStore()
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=5.0, max_output_tokens=600)
    h = Harness(HarnessConfig(store=store, cost=cost), load_entry_points=False)
    model = ScriptedModel([text("y" * 2000, inp=200, out=500), *replies], stream=True, chunk=20)
    agent = make_agent(model, [], h.middlewares())
    seen = 0
    with h.acting_for(U42):
        stream = agent.reply_stream(UserMsg("user", "hi"))
        async for event in stream:
            seen += len(event.delta) if isinstance(event, TextBlockDeltaEvent) else 0
            if seen >= 1700:
                break
    return h, store, agent, stream


async def test_a_stream_dropped_mid_answer_is_charged_what_it_used():
    """Red team: a consumer that dropped ``reply_stream`` after most of the
    answer had streamed was charged $0 (24 calls, a $0.30 quota never
    reached). The request and what streamed are charged (an estimate)."""
    _, store, _, stream = await _stream_stopped_reading()
    await stream.aclose()
    await asyncio.sleep(0.1)  # AgentScope's own task winds the reply down
    assert await store.get_spend(U42.key) >= (1 + 1700 // 4) * 100.0 / 1e6


async def test_a_stream_left_unread_is_charged_before_its_run_is_settled():
    """Red team (second pass): a consumer that stopped reading without
    closing the stream; the agent's next reply settles that run
    ``abandoned``: its report said $0, the stream was charged only when
    the garbage collector closed it, after the report."""
    from agentscope.message import UserMsg

    h, store, agent, stream = await _stream_stopped_reading(text("second", inp=10, out=1))
    with h.acting_for(U42):
        _ = [e async for e in agent.reply_stream(UserMsg("user", "again"))]
        _ = [e async for e in stream]  # the first consumer reads on: charged once, not again (red team, third pass)
    first = h.reports[0]
    assert (first.terminal_state, first.reason) == (TerminalState.CANCELLED, "abandoned")
    assert first.spent_usd >= (1 + 1700 // 4) * 100.0 / 1e6
    assert await store.get_spend(U42.key) == pytest.approx(first.spent_usd + h.reports[1].spent_usd)


async def test_breakers_fall_back_to_local_state_and_recover_when_the_store_returns():
    store = Failing("breaker_allow", "breaker_record")
    h = Harness(HarnessConfig(store=store, breaker_failures=1, breaker_cooldown_s=60),
                load_entry_points=False)
    executed: list[str] = []
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    _, report = await reply(h, make_agent(model, shop(executed), h.middlewares()), U42)
    assert executed == ["a"] and report.terminal_state == TerminalState.COMPLETED
    fallback = [d for d in report.decisions if d.action == "breaker_fallback"]
    assert fallback and "this process's breaker" in fallback[0].detail
    store.down = False
    h.services.fleet._store_retry_at = 0.0  # the retry second has passed
    model2 = ScriptedModel([calls(("search", {"q": "b"})), text("ok")])
    _, report2 = await reply(h, make_agent(model2, shop(executed), h.middlewares()), U42)
    assert executed == ["a", "b"]
    assert not any(d.action == "breaker_fallback" for d in report2.decisions)


async def test_limits_fail_closed_when_the_store_is_down():
    store = Failing("rate_acquire", "lease_acquire", "reserve_spend")
    h = Harness(HarnessConfig(
        store=store, rate_limits=[RateLimit(scope="tool", tool="search", calls_per_min=10)],
    ), load_entry_points=False)
    executed: list[str] = []
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    _, report = await reply(h, make_agent(model, shop(executed), h.middlewares()), U42)
    assert executed == [] and report.refusals == {"dependency_down": 1}
    assert _tool_results(model)[0].startswith("[harness:dependency_down]")

    cost = CostPolicy(prices={"scripted": (2.0, 8.0)}, daily_quota_usd=1.0)
    h2 = Harness(HarnessConfig(store=store, cost=cost,
                               concurrency_limits=[ConcurrencyLimit(scope="tenant", max_in_flight=5)]),
                 load_entry_points=False)
    model2 = ScriptedModel([text("never")])
    _, report2 = await reply(h2, make_agent(model2, [], h2.middlewares()), U42)
    assert model2.calls == [] and report2.reason == "dependency_down"
    store.names.discard("lease_acquire")
    model3 = ScriptedModel([text("never")])
    _, report3 = await reply(h2, make_agent(model3, [], h2.middlewares()), U42)
    assert model3.calls == [] and report3.reason == "dependency_down"  # the reservation failed
    store.down = False
    model4 = ScriptedModel([text("back")])
    answer4, report4 = await reply(h2, make_agent(model4, [], h2.middlewares()), U42)
    assert answer4 == "back" and report4.terminal_state == TerminalState.COMPLETED


def stored_results(agent: Any) -> list[str]:
    """The tool results in the agent's context (what the model would read)."""
    from agentscope.message import ToolResultBlock

    return [b.output if isinstance(b.output, str) else "".join(getattr(x, "text", "") for x in b.output)
            for m in agent.state.context if not isinstance(m.content, str)
            for b in m.content if isinstance(b, ToolResultBlock)]


def _tool_results(model: ScriptedModel) -> list[str]:
    from scripted import tool_messages

    return tool_messages(model.calls[-1])


# ------------------------------------------------------------ a real Redis restart


async def test_a_redis_restart_fails_closed_then_recovers_without_a_restart(private_redis):
    from agentscope_harness.stores import RedisStore

    store = RedisStore(private_redis.url, prefix="restart", timeout_s=0.5)
    cost = CostPolicy(prices={"scripted": (2.0, 8.0)}, daily_quota_usd=1.0, max_output_tokens=100)
    h = Harness(HarnessConfig(
        store=store, cost=cost,
        rate_limits=[RateLimit(scope="tool", tool="search", calls_per_min=100)],
    ), load_entry_points=False)
    executed: list[str] = []
    try:
        model = ScriptedModel([calls(("search", {"q": "a"})), text("first", inp=50, out=50)])
        answer, report = await reply(h, make_agent(model, shop(executed), h.middlewares()), U42)
        assert answer == "first" and executed == ["a"]

        # the run is mid-way (its tool is running) when Redis goes away
        def stop_redis_then_answer(_turn: Any) -> Any:
            private_redis.stop()
            return calls(("search", {"q": "b"}), inp=50, out=50)

        model2 = ScriptedModel([stop_redis_then_answer, text("never")])
        agent2 = make_agent(model2, shop(executed), h.middlewares())
        answer2, report2 = await reply(h, agent2, U42)
        assert executed == ["a"]  # the tool's limit could not be checked: refused
        assert stored_results(agent2)[0].startswith("[harness:dependency_down]")
        assert report2.terminal_state == TerminalState.INCOMPLETE
        assert report2.reason == "dependency_down" and len(model2.calls) == 1
        assert answer2.startswith(STORE_DOWN)  # the spend store is down: the budget fails closed
        assert any("daily spend not charged yet" in d.detail for d in report2.decisions)

        private_redis.start()
        h.services.fleet._store_retry_at = 0.0  # the breaker's retry second has passed
        model3 = ScriptedModel([calls(("search", {"q": "c"})), text("back", inp=50, out=50)])
        answer3, report3 = await reply(h, make_agent(model3, shop(executed), h.middlewares()), U42)
        assert answer3 == "back" and executed == ["a", "c"]
        assert report3.terminal_state == TerminalState.COMPLETED
        assert not any(d.code == "dependency_down" for d in report3.decisions)
        # the restarted Redis (no persistence) counts from the recovery on, and is
        # given the spend it could not take while it was down (settled before the
        # next reservation)
        assert await store.get_spend(U42.key) == pytest.approx(report2.spent_usd + report3.spent_usd)
    finally:
        await store.aclose()


# ------------------------------------------------------------ leases outlive lease_s


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
async def test_a_slot_is_held_as_long_as_its_call_runs_past_lease_s(backend, tmp_path, request):
    """Two harnesses (two processes' worth) share one store; a call of the
    limited tool runs three times ``lease_s``: the other harness's call is
    refused the whole time (the lease is renewed), then admitted once the
    first is done (it is released, not left to lapse)."""
    from agentscope_harness.stores import RedisStore, SQLiteStore

    if backend == "memory":
        store: Any = MemoryStore()
    elif backend == "sqlite":
        store = SQLiteStore(str(tmp_path / "fleet.db"))
    else:
        store = RedisStore(request.getfixturevalue("redis_url"), prefix=request.getfixturevalue("prefix"))
    # lease_s is wide enough that a loaded CI machine's loop stall (a few
    # hundred ms) cannot lapse it between two renewals (every lease_s / 4)
    limit = ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1, lease_s=1.0)
    config = HarnessConfig(concurrency_limits=[limit], store=store)
    first, second = (Harness(config, load_entry_points=False) for _ in range(2))
    executed: list[str] = []
    long_model = ScriptedModel([calls(("search", {"q": "long"})), text("done")])
    long_run = asyncio.create_task(
        reply(first, make_agent(long_model, shop(executed, delay=3.0), first.middlewares()), U42),
    )
    while "long" not in executed:
        await asyncio.sleep(0.01)
    busy: list[str] = []
    for i in range(3):  # at about 0.8, 1.6 and 2.4 s: past lease_s, the call still runs
        await asyncio.sleep(0.8)
        model = ScriptedModel([calls(("search", {"q": f"other {i}"})), text("x")])
        await reply(second, make_agent(model, shop(executed), second.middlewares()), U7)
        busy += [m for m in _tool_results(model) if m.startswith("[harness:concurrency_limited]")]
    assert len(busy) == 3 and executed == ["long"]
    await long_run
    await asyncio.sleep(0.05)  # the release is sent in the background; the lease has at least 0.75 s left
    model = ScriptedModel([calls(("search", {"q": "after"})), text("x")])
    await reply(second, make_agent(model, shop(executed), second.middlewares()), U7)
    assert executed == ["long", "after"]
    assert first.services.fleet._renewer is None  # nothing held: the renewer stopped
    if backend == "redis":
        await store.aclose()


async def test_a_run_parked_for_a_human_gives_its_slot_back():
    """A parked run is not in flight: its slot goes back at the park, so
    another run of the same principal gets it at once (not after
    ``lease_s``), and the store holds no lease of it."""
    from agentscope_harness import ToolPolicy

    store = MemoryStore()
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=30)
    config = HarnessConfig(concurrency_limits=[limit], store=store,
                           tools={"search": ToolPolicy(ask_when=lambda args: "a human looks first")})
    h = Harness(config, load_entry_points=False)
    executed: list[str] = []
    parked = make_agent(ScriptedModel([calls(("search", {"q": "p"})), text("x")]), shop(executed), h.middlewares())
    _, report = await reply(h, parked, U42)
    assert report.terminal_state == TerminalState.WAITING_INPUT
    assert not h.services.fleet._holds[report.run_id].run  # nothing held while it waits
    _, report = await reply(h, make_agent(ScriptedModel([text("hello")]), shop(executed), h.middlewares()), U42)
    assert report.terminal_state == TerminalState.COMPLETED


async def test_a_resumed_run_takes_its_slot_again_or_does_not_run():
    """A parked run gave its slot back and another run took it: the
    approved call does not run beside it (max_in_flight stays 1), the
    resumed run ends ``concurrency_limited``. Resumed with the slot free,
    a run takes it again."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent

    from agentscope_harness import ToolPolicy

    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=0.3)
    config = HarnessConfig(concurrency_limits=[limit], store=MemoryStore(),
                           tools={"search": ToolPolicy(ask_when=lambda a: "a human first" if a["q"] == "p" else None)})
    h = Harness(config, load_entry_points=False)

    async def park(executed: list[str]) -> tuple[Any, UserConfirmResultEvent]:
        agent = make_agent(ScriptedModel([calls(("search", {"q": "p"})), text("parked done")]), shop(executed),
                           h.middlewares())
        with h.acting_for(U42):
            events, _ = await run(agent, "go")
        asked = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        return agent, UserConfirmResultEvent(
            reply_id=asked.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls],
        )

    async def resume(agent: Any, confirmed: UserConfirmResultEvent) -> Any:
        with h.acting_for(U42):
            await run(agent, "", confirmed)
        return h.last_report(agent)

    executed: list[str] = []
    agent, confirmed = await park(executed)
    gate = asyncio.Event()
    other = asyncio.create_task(reply(h, make_agent(
        ScriptedModel([calls(("search", {"q": "other"})), text("x")]), shop(executed, gate), h.middlewares()), U42))
    while "other" not in executed:
        await asyncio.sleep(0.005)
    report = await resume(agent, confirmed)
    gate.set()
    await other
    assert executed == ["other"]  # the approved call never ran beside it
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "concurrency_limited")

    executed = []
    agent, confirmed = await park(executed)
    report = await resume(agent, confirmed)
    assert executed == ["p"] and report.terminal_state == TerminalState.COMPLETED


def _parked_then_resumed_on_another_loop(lease_s: float) -> tuple[list[str], Any]:
    """A run parks in one ``asyncio.run`` and resumes at once in another
    (another request of a server): its call runs three times ``lease_s``
    while a second harness on the same store tries the principal's slot."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent

    from agentscope_harness import ToolPolicy

    store = MemoryStore()
    config = HarnessConfig(
        concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=lease_s)], store=store,
        tools={"search": ToolPolicy(ask_when=lambda a: "a human first" if a["q"] == "p" else None)},
    )
    h, other = Harness(config, load_entry_points=False), Harness(config, load_entry_points=False)
    executed: list[str] = []
    agent = make_agent(ScriptedModel([calls(("search", {"q": "p"})), text("done")]), shop(executed, delay=3 * lease_s),
                       h.middlewares())

    async def park() -> UserConfirmResultEvent:
        with h.acting_for(U42):
            events, _ = await run(agent, "go")
        asked = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        return UserConfirmResultEvent(
            reply_id=asked.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls],
        )

    async def resume_while_another_tries(confirmed: UserConfirmResultEvent) -> Any:
        async def resumed() -> None:
            with h.acting_for(U42):
                await run(agent, "", confirmed)

        task = asyncio.create_task(resumed())
        await asyncio.sleep(2 * lease_s)  # past lease_s: the call still runs
        _, report = await reply(other, make_agent(ScriptedModel([text("hi")]), shop(executed), other.middlewares()), U42)
        await task
        return report

    confirmed = asyncio.run(park())
    return executed, asyncio.run(resume_while_another_tries(confirmed))


def test_a_run_resumed_on_another_event_loop_keeps_its_slot_renewed():
    executed, report = _parked_then_resumed_on_another_loop(lease_s=0.3)
    assert executed == ["p"]
    assert report.reason == "concurrency_limited"


class _Flaky:
    """A store whose lease renewals fail (as a store that cannot answer)
    while ``down`` is set; everything else goes to a ``MemoryStore``."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def lease_renew(self, *args: Any, **kwargs: Any) -> bool:
        if self.down:
            raise ConnectionError("the store is restarting")
        return await self.inner.lease_renew(*args, **kwargs)


async def test_a_store_outage_shorter_than_half_of_lease_s_keeps_the_slot(caplog):
    # lease 1.2 s, renewed each 0.3 s: an outage of 0.5 s leaves 0.4 s to spare
    # (a loaded CI machine's loop may lag that long before the next renewal)
    store = _Flaky()
    limit = ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1, lease_s=1.2)
    first, second = (Harness(HarnessConfig(concurrency_limits=[limit], store=store), load_entry_points=False)
                     for _ in range(2))
    executed: list[str] = []
    long_run = asyncio.create_task(reply(first, make_agent(
        ScriptedModel([calls(("search", {"q": "long"})), text("done")]), shop(executed, delay=2.6),
        first.middlewares()), U42))
    while "long" not in executed:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    store.down = True  # for 0.5 s: renewals fail
    await asyncio.sleep(0.5)
    store.down = False
    await asyncio.sleep(0.8)  # past the lease the last renewal before the outage gave
    model = ScriptedModel([calls(("search", {"q": "other"})), text("x")])
    await reply(second, make_agent(model, shop(executed), second.middlewares()), U7)
    await long_run
    assert executed == ["long"]
    assert _tool_results(model)[0].startswith("[harness:concurrency_limited]")
    assert "could not renew" in caplog.text


async def test_a_daily_quota_without_a_principal_fails_closed():
    """Red team: with no principal bound the daily quota was skipped (10
    calls at $0.03 against a $0.001 quota, all completed). It is kept per
    principal: with none, no model call is made."""
    cost = CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=0.001)
    h = Harness(HarnessConfig(cost=cost), load_entry_points=False)
    model = ScriptedModel([text("spent", inp=200, out=100)])
    agent = make_agent(model, [], h.middlewares())
    _, final = await run(agent, "go")
    report = h.last_report(agent)
    assert model.calls == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert any("none is bound" in d.detail for d in report.decisions)


@pytest.mark.parametrize("loser", ["read later", "never read"])
async def test_two_streamed_calls_of_one_run_in_flight_at_once_are_each_charged_once(loser: str):
    """Red team (fourth pass): an outer middleware hedging the model call
    (starts A and B, answers with B, drains A after): one in-flight slot per
    run left A uncharged and its reservation held. Fifth pass: a loser never
    read at all was never charged, its reservation held; each is charged
    before the report."""
    from agentscope.middleware import MiddlewareBase

    class Hedge(MiddlewareBase):
        async def get_middleware_key(self) -> str:
            return "hedge"

        async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            first = await next_handler(**input_kwargs)
            second = await next_handler(**input_kwargs)

            async def merged() -> Any:
                if loser == "read later":
                    await first.__anext__()
                async for chunk in second:
                    yield chunk
                if loser == "read later":
                    async for _ in first:  # the loser is read on later: its provider bills it anyway
                        pass

            return merged()

    store = MemoryStore()
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices={"scripted": (100.0, 100.0)}, daily_quota_usd=5.0,
                                                           max_output_tokens=600)), load_entry_points=False)
    model = ScriptedModel([text("A" * 200, inp=200, out=50), text("B" * 200, inp=200, out=50)], stream=True, chunk=20)
    agent = make_agent(model, [], [Hedge(), *h.middlewares()])
    await reply(h, agent, U42)
    one = 250 * 100.0 / 1e6
    spent = await store.get_spend(U42.key)
    assert spent == pytest.approx(2 * one) if loser == "read later" else one < spent < 2 * one
    assert h.last_report(agent).spent_usd == pytest.approx(spent)
    assert not any(store._holds.values())

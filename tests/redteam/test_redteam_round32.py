"""Red team, round 32: the round-31 fixes, attacked from the user's side.

1. tool ``rate_limits`` given back (``_Taken.still_held``, ``Fleet.running``):
   two units of one bucket taken by calls a slower later gate refused (and
   one, the control); a candidate equal to the live policy after a call
   dropped while it ran; a parallel batch streamed through AgentScope's real
   ``OpenAIChatModel``, dropped at its first start;
2. the half-open probe abandoned (dropped before it ran): this process's own
   breaker (a store that keeps no breakers), and the shared one in the three
   stores (regression);
3. the daily quota under the policy that keeps one, on the root's spend: a
   sub-agent's Harness keeping a smaller quota than its lead's, and a larger
   one; what a sub-agent under a Harness with no cost policy spends (kept in
   the store for the principal's later runs?); an enforcing sub-agent under
   a shadow lead's quota;
4. a client's result for a call no process judged here (a reply restored in
   another process): the model's next turn (regression of the prerequisite
   promise beside round 31's same-turn fix);
5. a notice quoting a secret; a remembered approval's ``when`` bounded by
   ``hook_timeout_s`` with no deadline (regression guards).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s, real stores (the Redis at
``redis://127.0.0.1:6399/1``, under a key prefix of the test's own).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import ToolResultBlock, UserMsg
from hookkit import Ran, every_event, searcher
from scripted import ALICE, BOB, ScriptedModel, calls, delegating_tool, drain, make_agent, run, text, tool
from test_redteam_round31_fleet import (
    _Clock,
    _DailySpendOnly,
    _dropped_at_its_start,
    _refund_tool,
    _stock_agent,
    _verified_refunds,
)

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    HookRejectSignal,
    Principal,
    RateLimit,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.stores import MemoryStore

CAROL = Principal(user_id="u-9", tenant="acme")
SECRET = "zq7-CORAL-harbor-88421-tango"



def _fake_minute(monkeypatch: pytest.MonkeyPatch) -> tuple[_Clock, MemoryStore]:
    """A store and a fleet reading one fake clock: a minute can pass in a test."""
    import time as real_time

    import agentscope_harness.fleet as fleet_module

    clock = _Clock()

    class _FleetTime:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_time, name)

        def monotonic(self) -> float:
            return clock()

    monkeypatch.setattr(fleet_module, "time", _FleetTime())
    return clock, MemoryStore(clock=clock)


# ====================================================== 1. rate units given back


async def test_two_units_a_slow_later_gate_refused_are_both_back(monkeypatch: pytest.MonkeyPatch) -> None:
    clock, store = _fake_minute(monkeypatch)
    rate = RateLimit(scope="tool", tool="refund", calls_per_min=2)
    both_in, gate = asyncio.Event(), asyncio.Event()
    waiting: list[str] = []

    @harness_hook("pre_tool_call", priority=45, name="house_fraud_check", kind="safety")
    async def house_fraud_check(ctx: HookContext) -> None:
        if ctx.principal == ALICE:  # Alice's two tabs: the fraud service is slow, then says no
            waiting.append(ctx.tool.id)
            if len(waiting) == 2:
                both_in.set()
            await gate.wait()
            raise HookRejectSignal("Refused by the fraud check.", code="policy_refused")

    h = Harness(HarnessConfig(store=store, rate_limits=[rate], hook_timeout_s=60),
                hooks=[house_fraud_check], load_entry_points=False)
    ran = Ran()

    def shop(order: str, name: str) -> Any:
        model = ScriptedModel([calls(("refund", {"order_id": order})), text("ok")])
        return make_agent(model, [_refund_tool(ran)], h.middlewares(), name=name)

    with h.acting_for(ALICE):  # two tabs at t=0: both units of the bucket taken
        tabs = [asyncio.create_task(run(shop(f"o-{i}", f"tab{i}"), "refund")) for i in (1, 2)]
        await asyncio.wait_for(both_in.wait(), 2)
    clock.now += 31  # the fraud service answers after 31 s: both refused, neither ran
    gate.set()
    await asyncio.gather(*tabs)
    await asyncio.sleep(0.01)
    for who, order in ((BOB, "o-3"), (CAROL, "o-4")):  # no refund ran in the last minute: 2 may
        agent = shop(order, order)
        with h.acting_for(who):
            await run(agent, "refund")
    assert [a["order_id"] for a in ran.of("refund")] == ["o-3", "o-4"]


async def test_control_one_unit_a_slow_later_gate_refused_is_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: with one unit taken the bucket refilled on its own; both later calls run."""
    clock, store = _fake_minute(monkeypatch)
    rate = RateLimit(scope="tool", tool="refund", calls_per_min=2)
    entered, gate = asyncio.Event(), asyncio.Event()

    @harness_hook("pre_tool_call", priority=45, name="house_fraud_check", kind="safety")
    async def house_fraud_check(ctx: HookContext) -> None:
        if ctx.principal == ALICE:
            entered.set()
            await gate.wait()
            raise HookRejectSignal("Refused by the fraud check.", code="policy_refused")

    h = Harness(HarnessConfig(store=store, rate_limits=[rate], hook_timeout_s=60),
                hooks=[house_fraud_check], load_entry_points=False)
    ran = Ran()

    def shop(order: str, name: str) -> Any:
        model = ScriptedModel([calls(("refund", {"order_id": order})), text("ok")])
        return make_agent(model, [_refund_tool(ran)], h.middlewares(), name=name)

    with h.acting_for(ALICE):
        tab = asyncio.create_task(run(shop("o-1", "tab"), "refund"))
        await asyncio.wait_for(entered.wait(), 2)
    clock.now += 31
    gate.set()
    await tab
    await asyncio.sleep(0.01)
    for who, order in ((BOB, "o-3"), (CAROL, "o-4")):
        with h.acting_for(who):
            await run(shop(order, order), "refund")
    assert [a["order_id"] for a in ran.of("refund")] == ["o-3", "o-4"]


async def test_a_candidate_equal_to_the_live_policy_agrees_after_a_call_dropped_while_it_ran() -> None:
    """Regression guard: the live unit is spent by a call that started
    (``Fleet.running``), and the candidate's is not given back when the run is
    freed: the next call is refused by both."""
    rate = RateLimit(scope="principal", tool="refund", calls_per_min=1)
    config = HarnessConfig(rate_limits=[rate])
    h = Harness(config, candidate=config, load_entry_points=False)
    started, ran = asyncio.Event(), Ran()

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        started.set()
        await asyncio.sleep(30)  # the payment API hangs; the caller gives up
        return f"refunded {order_id}"

    first = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("x")]),
                       [tool(refund, is_concurrency_safe=False)], h.middlewares(), name="first")
    with h.acting_for(ALICE):
        task = asyncio.create_task(drain(first, UserMsg("user", "refund o-1")))
        await asyncio.wait_for(started.wait(), 2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0.05)
    again = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")]),
                       [_refund_tool(ran)], h.middlewares(), name="again")
    with h.acting_for(ALICE):
        await run(again, "refund o-1")
    report = h.last_report(again)
    assert report.refusals == {"rate_limited": 1}  # the live policy: the unit was spent (it ran)
    assert report.candidate_differences == [], report.candidate_differences


# ====================================================== 2. the abandoned half-open probe


class _NoBreakerStore(_DailySpendOnly):
    """A custom store keeping the daily spend alone: no shared breakers, so
    each process's own breaker decides (README: "Breakers fall back to each
    process's own state")."""


async def test_an_abandoned_local_probe_reopens_the_breaker_for_a_cooldown() -> None:
    h = Harness(HarnessConfig(store=_NoBreakerStore(), breaker_failures=1, breaker_cooldown_s=0.05),
                load_entry_points=False)
    ran, down = Ran(), [True]
    with h.acting_for(ALICE):  # the dependency is down: this process's breaker opens
        await run(_stock_agent(h, ran, down, "SKU-1", "a"), "stock?")
    down[0] = False  # it is back
    await asyncio.sleep(0.1)  # the cooldown passed
    with h.acting_for(ALICE):  # Alice's call is the probe; she closes the tab before it runs
        await _dropped_at_its_start(_stock_agent(h, ran, down, "SKU-1", "b"))
    await asyncio.sleep(0.2)  # four cooldowns later
    bob = _stock_agent(h, ran, down, "SKU-2", "bob")
    with h.acting_for(BOB):
        await run(bob, "stock?")
    assert ran.of("inventory")[-1] == {"sku": "SKU-2"}
    assert "dependency_down" not in h.last_report(bob).refusals


async def test_control_a_local_probe_that_ran_closes_the_breaker() -> None:
    """Control: the same breaker, the probe not dropped: it runs and closes it."""
    h = Harness(HarnessConfig(store=_NoBreakerStore(), breaker_failures=1, breaker_cooldown_s=0.05),
                load_entry_points=False)
    ran, down = Ran(), [True]
    with h.acting_for(ALICE):
        await run(_stock_agent(h, ran, down, "SKU-1", "a"), "stock?")
    down[0] = False
    await asyncio.sleep(0.1)
    for sku, who in (("SKU-1", ALICE), ("SKU-2", BOB)):
        with h.acting_for(who):
            await run(_stock_agent(h, ran, down, sku, sku), "stock?")
    assert [a["sku"] for a in ran.of("inventory")] == ["SKU-1", "SKU-1", "SKU-2"]


async def test_an_abandoned_shared_probe_does_not_open_a_breaker_closed_meanwhile(
    two_workers: tuple[Any, Any],
) -> None:
    """The store's probe abandoned by a run that closes after another
    worker's late success closed the breaker: the reopening counts one
    failure on a closed breaker (``breaker_failures=2``: still closed)."""
    store_a, store_b = two_workers
    cfg = dict(breaker_failures=2, breaker_cooldown_s=0.05)
    w1 = Harness(HarnessConfig(store=store_a, **cfg), load_entry_points=False)
    w2 = Harness(HarnessConfig(store=store_b, **cfg), load_entry_points=False)
    ran, down = Ran(), [True]
    with w1.acting_for(ALICE):  # two failures: open fleet-wide
        for name in ("a", "b"):
            await run(_stock_agent(w1, ran, down, "SKU-1", name), "stock?")
    down[0] = False
    await asyncio.sleep(0.1)
    with w1.acting_for(ALICE):  # the probe, dropped
        await _dropped_at_its_start(_stock_agent(w1, ran, down, "SKU-1", "c"))
    await asyncio.sleep(0.1)  # the cooldown the abandoned probe reopened passed
    for who, name in ((BOB, "bob"), (CAROL, "carol")):
        agent = _stock_agent(w2, ran, down, "SKU-2", name)
        with w2.acting_for(who):
            await run(agent, "stock?")
        assert w2.last_report(agent).refusals == {}
    assert len(ran.of("inventory")) == 4


# ====================================================== 3. the daily quota through nesting

_PRICES = {"scripted": (100.0, 100.0)}
"""Each scripted call below (200 tokens in, 100 out) costs $0.03."""


def _spender(h: Harness, ran: Ran, calls_made: int, name: str) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel([calls(("search", {"q": f"{name}{i}"}), inp=200, out=100) for i in range(calls_made)]
                          + [text(f"{name} done", inp=200, out=100)])
    return make_agent(model, [searcher(ran)], h.middlewares(), name=name), model


async def test_a_sub_agent_is_held_to_its_harness_quota_under_a_lead_keeping_a_larger_one() -> None:
    """Regression guard (README: a sub-agent's Harness quota holds its calls):
    under a lead keeping a larger quota, on a store keeping the spend alone,
    the $0.05 researcher stops within one call past it."""
    store = _DailySpendOnly()
    ran = Ran()
    sub_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=_PRICES, daily_quota_usd=0.05)),
                    load_entry_points=False)
    researcher, model = _spender(sub_h, ran, 5, "researcher")
    lead_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=_PRICES, daily_quota_usd=1.0)),
                     load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"}), inp=200, out=100),
                                     text("done", inp=200, out=100)]),
                      [delegating_tool(researcher)], lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    # the lead's first call ($0.03) and at most one researcher call past the $0.05 quota
    assert len(model.calls) <= 2, f"the researcher made {len(model.calls)} calls"
    assert sub_h.last_report(researcher).reason == "budget"


async def test_a_leads_quota_is_not_loosened_by_a_sub_agents_harness_keeping_a_larger_one() -> None:
    """Regression guard: a sub-agent's Harness keeping a larger quota (it
    charged the spend store) does not loosen the lead's own $0.05 quota."""
    store = _DailySpendOnly()
    ran = Ran()
    sub_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=_PRICES, daily_quota_usd=1.0)),
                    load_entry_points=False)
    researcher, _ = _spender(sub_h, ran, 0, "researcher")
    lead_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=_PRICES, daily_quota_usd=0.05)),
                     load_entry_points=False)
    script = [calls(("delegate", {"task": "t"}), inp=200, out=100)]
    script += [calls(("search", {"q": f"q{i}"}), inp=200, out=100) for i in range(5)]
    lead_model = ScriptedModel([*script, text("Here is the report.", inp=200, out=100)])
    lead = make_agent(lead_model, [delegating_tool(researcher), searcher(ran)], lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    # $0.03 lead + $0.03 researcher spent: the lead's next call may overshoot by one, no more
    assert len(lead_model.calls) <= 2, f"the lead made {len(lead_model.calls)} calls"
    assert lead_h.last_report(lead).reason == "budget"


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states ('Budgets users can see', Limit): a sub-agent under a Harness that "
    "keeps no daily quota is not charged to the principal's daily spend; its usage counts in the "
    "lead's run (spent_usd, caps) only: the root run spent $0.12, the store keeps $0.06 "
    "(Harness.charge_usage charges the store under the charging Harness's cost policy only)"))
@pytest.mark.parametrize("store_kind", ["memory", "spend_only"])
async def test_what_a_sub_agent_spends_counts_on_the_principals_daily_spend(store_kind: str) -> None:
    """A lead's Harness keeps a daily quota; its researcher's Harness keeps
    no cost policy. The root's spend (the researcher's calls at the lead's
    prices included, README: "Its usage is charged to each enclosing run") is
    the principal's spend today: a later run must see it."""
    store: Any = MemoryStore() if store_kind == "memory" else _DailySpendOnly()
    ran = Ran()
    sub_h = Harness(HarnessConfig(store=store), load_entry_points=False)
    researcher, _ = _spender(sub_h, ran, 1, "researcher")
    cost = CostPolicy(prices=_PRICES, daily_quota_usd=5.0)
    lead_h = Harness(HarnessConfig(store=store, cost=cost), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"}), inp=200, out=100),
                                     text("done", inp=200, out=100)]),
                      [delegating_tool(researcher)], lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    report = lead_h.last_report(lead)
    assert report.spent_usd == pytest.approx(0.12)  # 2 lead calls + 2 researcher calls
    assert await store.get_spend(ALICE.key) == pytest.approx(report.spent_usd)


async def test_an_enforcing_sub_agent_is_not_held_to_a_shadow_leads_daily_quota() -> None:
    """Regression guard: "A Harness in shadow mode lends no caps" (README)."""
    store = MemoryStore()
    ran = Ran()
    sub_h = Harness(HarnessConfig(store=store, cost=CostPolicy(prices=_PRICES, cap_usd=10.0)),
                    load_entry_points=False)
    researcher, model = _spender(sub_h, ran, 4, "researcher")
    lead_h = Harness(HarnessConfig(store=store, mode="shadow", cost=CostPolicy(
        prices=_PRICES, daily_quota_usd=0.05, max_output_tokens=200)), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"}), inp=200, out=100),
                                     text("done", inp=200, out=100)]),
                      [delegating_tool(researcher)], lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    assert len(model.calls) == 5 and sub_h.last_report(researcher).reason == "answered"


def _real_model(server: Any) -> Any:
    """AgentScope's real ``OpenAIChatModel`` (streaming, no retries) on the scripted server."""
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    return OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
                           model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
                           client_kwargs={"max_retries": 0, "timeout": 10.0})


async def test_a_parallel_batch_dropped_at_its_first_start_loses_and_doubles_no_unit(server: Any) -> None:
    """Through the real client (a streamed parallel batch, arguments split
    across chunks): three searches admitted under ``calls_per_min=3``, the
    caller drops the stream at the first call's start. Each unit is spent
    by a call that started or given back by one that did not: the next
    batch of three runs exactly the calls left."""
    from server import Reply

    ran = Ran()
    rate = RateLimit(scope="principal", tool="search", calls_per_min=3)
    h = Harness(HarnessConfig(rate_limits=[rate]), load_entry_points=False)
    batch = [("search", {"q": f"mug {i}"}) for i in range(3)]
    server.plan(Reply(tool_calls=batch))
    model = _real_model(server)
    try:
        first = make_agent(model, [searcher(ran)], h.middlewares(), name="first")
        with h.acting_for(ALICE):
            await _dropped_at_its_start(first)
        await asyncio.sleep(0.05)
        started = len(ran)
        server.script.clear()
        server.plan(Reply(tool_calls=batch), Reply(text="done"))
        again = make_agent(model, [searcher(ran)], h.middlewares(), name="again")
        with h.acting_for(ALICE):
            await run(again, "mugs")
    finally:
        await model.client.close()
    assert len(ran) == 3, (started, ran)
    assert h.last_report(again).refusals.get("rate_limited", 0) == started


# ====================================================== 4. a client's result restored elsewhere


async def test_a_refund_in_the_turn_after_a_client_result_restored_elsewhere_runs() -> None:
    """Regression guard beside round 31's fix (the client result is in the
    batch of the turn it was made in): the model's next turn, after the
    client's result reached a reply restored in another process, reads it;
    its refund runs."""
    from agentscope.state import AgentState

    ran = Ran()
    h1, agent1, model = _verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"})), calls(("refund", {"order_id": "A-1"})), text("Refunded A-1."),
    ])
    with h1.acting_for(ALICE):
        events = await drain(agent1, UserMsg("user", "refund A-1, code 1234"))
    asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    state = AgentState.model_validate_json(agent1.state.model_dump_json())
    h2, agent2, _ = _verified_refunds(ran, model=model, state=state)
    done = ToolResultBlock(id=asked.id, name=asked.name, output="code checked", state="success")
    with h2.acting_for(ALICE):
        await drain(agent2, ExternalExecutionResultEvent(reply_id=agent2.state.reply_id, execution_results=[done]))
    assert ran.of("refund") == [{"order_id": "A-1"}]
    assert h2.last_report(agent2).refusals == {}


# ====================================================== 5. hints, notices, a remembered approval's when


async def test_a_notice_quoting_a_secret_reaches_neither_the_model_nor_the_stream() -> None:
    @harness_hook("post_tool_call", priority=60, name="audit_note")
    def note(ctx: HookContext) -> None:
        ctx.notice(f"Query {ctx.tool.args['q']} was logged for audit.")

    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[SECRET]), hooks=[note], load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": SECRET})), text("done")])
    agent = make_agent(model, [searcher(ran)], h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "go")
    sent = json.dumps(model.calls[1].formatted)
    assert "logged for audit" in sent and SECRET not in sent.split("logged for audit")[0][-200:]
    assert SECRET not in every_event([e for e in events if type(e).__name__ == "CustomEvent"])
    decisions = [d.detail for d in h.last_report(agent).decisions if d.hook == "audit_note"]
    assert decisions and all(SECRET not in d for d in decisions)


async def test_a_remembered_approvals_slow_when_is_bounded_by_the_hook_timeout() -> None:
    """Regression guard: no deadline, ``hook_timeout_s=0.2``: a ``when``
    that hangs covers nothing (the call is asked about), in well under its 5 s."""

    async def slow_when(args: dict) -> bool:
        await asyncio.sleep(5)
        return True

    ran = Ran()
    h = Harness(HarnessConfig(hook_timeout_s=0.2, tools={"search": ToolPolicy(ask_when=lambda a: "needs a human")}),
                load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [searcher(ran)],
                       h.middlewares())
    h.approve(ALICE, agent.state.session_id, "search", when=slow_when)
    started = time.monotonic()
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "go"))
    assert time.monotonic() - started < 1.5
    assert ran == [] and h.last_report(agent).terminal_state.value == "waiting_input"
    assert any(type(e).__name__ == "RequireUserConfirmEvent" for e in events)

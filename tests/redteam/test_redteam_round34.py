"""Red team, round 34: the round-32 and round-33 fixes, attacked from the user's side.

1. an "always allow" rule serves the principal who gave it
   (``ApprovalBook.only_rules_of``): two agents sharing one AgentScope
   permission context (Alice's rule given on one, Bob served by the other);
   the tool adapter alone; Bob's parallel batch; Bob's call judged by a
   sub-agent Alice gave the rule to; the application's own rules and a rule
   for another tool name; an exception inside AgentScope's permission check
   and a cancellation while Bob's call is judged (is Alice's rule back, and
   Bob's still hidden?);
2. tool ``rate_limits`` given back (``Fleet._unit_ends``, ``_Taken.still_held``):
   a worker's earlier unit given back before a later one (does the later one
   still count for a window that already passed?);
3. the abandoned local probe with the store down (regression guard).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionContext, PermissionRule
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from hookkit import Ran, refund_fn, refunding
from scripted import ALICE, BOB, ScriptedModel, calls, delegating_tool, drain, make_agent, run, text, tool
from test_redteam_round28 import _asking_refund, _parked
from test_redteam_round31_fleet import _dropped_at_its_start, _stock_agent
from test_redteam_round32 import CAROL, _fake_minute, _refund_tool

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookContext,
    HookRejectSignal,
    RateLimit,
    harness_hook,
)
from agentscope_harness.adapters import HarnessToolAdapter
from agentscope_harness.stores import MemoryStore


def _rule(tool_name: str = "refund") -> PermissionRule:
    return PermissionRule(tool_name=tool_name, rule_content=None, behavior=PermissionBehavior.ALLOW, source="session")


async def _alice_allows_refunds(h: Harness, agent: Any, rules: list[Any] | None = None) -> None:
    """Alice's refund parks; she confirms it and says "always allow"."""
    ask = await _parked(h, agent)
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=rules or [_rule()])
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))


def _asked(events: list[Any]) -> bool:
    return any(isinstance(e, RequireUserConfirmEvent) for e in events)


# ====================================================== 1. whose "always allow"


async def test_alices_rule_does_not_serve_bob_on_another_agent_sharing_the_permission_context() -> None:
    shared = PermissionContext()  # the application's one policy, shared by its desks
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()

    def desk(script: list[Any], name: str) -> Any:
        return make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares(),
                          name=name, state=AgentState(permission_context=shared))

    alices = desk([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")], "alices")
    bobs = desk([calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")], "bobs")
    await _alice_allows_refunds(h, alices)
    assert ran.of("refund") == [{"order_id": "o-1"}]
    with h.acting_for(BOB):
        events = await drain(bobs, UserMsg("user", "refund o-999 for me"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert _asked(events)


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states ('Either adapter works alone', Limits of the tool adapter alone): a "
    "confirmation's permission rules are not kept to the principal who gave them without on_reply, "
    "so Alice's 'always allow' runs Bob's refund unasked"))
async def test_alices_rule_does_not_serve_bob_with_the_tool_adapter_alone() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
                           calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")])
    tool_side = [m for m in h.middlewares() if isinstance(m, HarnessToolAdapter)]
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), tool_side)
    await _alice_allows_refunds(h, agent)
    assert ran.of("refund") == [{"order_id": "o-1"}]
    with h.acting_for(BOB):
        events = await drain(agent, UserMsg("user", "refund o-999 for me"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert _asked(events)


def _refunds_and_lookups(ran: Ran, script: list[Any], context: PermissionContext | None = None,
                         safe: bool = False) -> tuple[Harness, Any]:
    """``refund`` and ``lookup``, neither with a permission of its own (AgentScope asks)."""
    h = Harness(HarnessConfig(), load_entry_points=False)

    async def lookup(order_id: str) -> str:
        """Look an order up.

        Args:
            order_id (str): The order.
        """
        ran.append(("lookup", {"order_id": order_id}))
        return f"order {order_id}: 2 mugs"

    tools = [FunctionTool(refund_fn(ran), is_concurrency_safe=safe), FunctionTool(lookup)]
    state = AgentState(permission_context=context) if context is not None else None
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=tools)), h.middlewares(),
                       **({"state": state} if state is not None else {}))
    return h, agent


async def test_bobs_parallel_refunds_are_asked_not_run_on_alices_rule() -> None:
    """Regression guard: Bob's two refunds in one concurrent batch, judged
    side by side (the hiding counted), neither runs; Alice's rule is back after."""
    ran = Ran()
    h, agent = _refunds_and_lookups(ran, [
        calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
        calls(("refund", {"order_id": "o-5"}), ("refund", {"order_id": "o-6"})), text("Refunded both."),
        calls(("refund", {"order_id": "o-2"})), text("Refunded o-2."),
    ], safe=True)
    await _alice_allows_refunds(h, agent)
    with h.acting_for(BOB):
        events = await drain(agent, UserMsg("user", "refund o-5 and o-6"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert _asked(events)
    assert len(agent.state.permission_context.allow_rules["refund"]) == 1


async def test_the_applications_own_rules_serve_bob_beside_alices() -> None:
    """Regression guard: a rule the application set on the agent serves
    everyone; Alice's rule for another tool (``lookup``, given with her
    refund's confirmation) serves her only; both stay on the agent."""
    app_rule = _rule("refund")
    ran = Ran()
    h, agent = _refunds_and_lookups(ran, [
        calls(("lookup", {"order_id": "o-1"})), text("Looked o-1 up."),
        calls(("refund", {"order_id": "o-7"}), ("lookup", {"order_id": "o-7"})), text("Done."),
    ], context=PermissionContext(allow_rules={"refund": [app_rule]}))
    ask = await _parked(h, agent)  # Alice's lookup asks
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=[_rule("lookup")])
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))
    with h.acting_for(BOB):
        events = await drain(agent, UserMsg("user", "refund o-7 and look it up"))
    assert ran == [("lookup", {"order_id": "o-1"}), ("refund", {"order_id": "o-7"})], ran
    assert _asked(events)  # his lookup, on Alice's rule: asked
    rules = agent.state.permission_context.allow_rules
    assert [len(rules["refund"]), len(rules["lookup"])] == [1, 1]


async def test_a_sub_agent_alice_gave_a_rule_asks_before_refunding_for_bob() -> None:
    """Bob's lead delegates to the sub-agent Alice confirmed a refund on
    ("always allow"): the sub-agent's run acts for Bob (inherited) and asks."""
    ran = Ran()
    h, desk = _asking_refund(ran, [calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
                                   calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")])
    await _alice_allows_refunds(h, desk)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund o-999"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(delegating_tool(desk))])), h.middlewares(), name="lead")
    with h.acting_for(BOB):
        await drain(lead, UserMsg("user", "refund o-999"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran


class _Flaky(FunctionTool):
    """``refund`` whose own permission check (inside AgentScope's engine)
    fails for one order, and waits on ``gate`` for another."""

    def __init__(self, ran: Ran, gate: asyncio.Event, entered: asyncio.Event) -> None:
        super().__init__(refund_fn(ran))
        self.gate, self.entered = gate, entered

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:  # type: ignore[override]
        if tool_input.get("order_id") == "o-boom":
            raise RuntimeError("the permission service broke")
        if tool_input.get("order_id") == "o-slow":
            self.entered.set()
            await self.gate.wait()
        return await super().check_permissions(tool_input, context)


@pytest.mark.parametrize("how", ["engine-raises", "cancelled-mid-judgement"])
async def test_alices_rule_is_back_for_her_after_bobs_judgement_fails(how: str) -> None:
    """Regression guard: Bob's call judged without Alice's rule ends in an
    exception inside AgentScope's permission check, or Bob's reply is
    cancelled while it is judged: Alice's next refund runs unasked, Bob's
    next is still asked."""
    ran = Ran()
    gate, entered = asyncio.Event(), asyncio.Event()
    h = Harness(HarnessConfig(), load_entry_points=False)
    bobs_order = "o-boom" if how == "engine-raises" else "o-slow"
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
                           calls(("refund", {"order_id": bobs_order})),  # his reply ends there
                           calls(("refund", {"order_id": "o-2"})), text("Refunded o-2."),
                           calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[_Flaky(ran, gate, entered)])), h.middlewares())
    await _alice_allows_refunds(h, agent)
    with h.acting_for(BOB):
        task = asyncio.create_task(drain(agent, UserMsg("user", f"refund {bobs_order}")))
        if how == "cancelled-mid-judgement":
            await asyncio.wait_for(entered.wait(), 2)
            assert agent.state.permission_context.allow_rules["refund"] == []  # hidden while judged
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(agent.state.permission_context.allow_rules["refund"]) == 1
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-2"))
    assert ran.of("refund") == [{"order_id": "o-1"}, {"order_id": "o-2"}], ran
    assert not _asked(events)
    with h.acting_for(BOB):
        events = await drain(agent, UserMsg("user", "refund o-999"))
    assert ran.of("refund")[-1] == {"order_id": "o-2"}, ran


# ====================================================== 2. rate units given back


def _fraud_checked_refunds(store: Any, per_min: int) -> tuple[Harness, dict[str, asyncio.Event], list[str], Ran]:
    """A tool-wide ``refund`` rate; Alice's refunds wait on a slow fraud
    service (a safety hook after the rate gate) that then refuses them."""
    gates: dict[str, asyncio.Event] = {}
    waiting: list[str] = []

    @harness_hook("pre_tool_call", priority=45, name="house_fraud_check", kind="safety")
    async def house_fraud_check(ctx: HookContext) -> None:
        if ctx.principal == ALICE:
            order = ctx.tool.args["order_id"]
            waiting.append(order)
            await gates.setdefault(order, asyncio.Event()).wait()
            raise HookRejectSignal("Refused by the fraud check.", code="policy_refused")

    rate = RateLimit(scope="tool", tool="refund", calls_per_min=per_min)
    h = Harness(HarnessConfig(store=store, rate_limits=[rate], hook_timeout_s=60),
                hooks=[house_fraud_check], load_entry_points=False)
    for order in ("o-1", "o-2"):
        gates[order] = asyncio.Event()
    return h, gates, waiting, Ran()


def _shop(h: Harness, ran: Ran, order: str) -> Any:
    model = ScriptedModel([calls(("refund", {"order_id": order})), text("ok")])
    return make_agent(model, [_refund_tool(ran)], h.middlewares(), name=order)


async def _alices_two_tabs(h: Harness, ran: Ran, waiting: list[str]) -> list[asyncio.Task[Any]]:
    with h.acting_for(ALICE):  # two tabs at once: both units of the bucket taken, o-1's first
        tabs = [asyncio.create_task(run(_shop(h, ran, "o-1"), "refund"))]
        for _ in range(200):
            if waiting:
                break
            await asyncio.sleep(0.005)
        tabs.append(asyncio.create_task(run(_shop(h, ran, "o-2"), "refund")))
        for _ in range(200):
            if len(waiting) == 2:
                break
            await asyncio.sleep(0.005)
    assert waiting == ["o-1", "o-2"]
    return tabs


async def test_a_unit_given_back_after_an_earlier_one_frees_no_later_callers_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, store = _fake_minute(monkeypatch)
    h, gates, waiting, ran = _fraud_checked_refunds(store, per_min=2)
    tabs = await _alices_two_tabs(h, ran, waiting)
    gates["o-1"].set()  # o-1 refused at once: its unit is back (o-2's now ends at t+30)
    await tabs[0]
    await asyncio.sleep(0.01)
    clock.now += 30  # o-2's unit has passed: the bucket is full again
    for who, order in ((BOB, "o-3"), (CAROL, "o-4")):  # two run: the bucket's two
        with h.acting_for(who):
            await run(_shop(h, ran, order), "refund")
    gates["o-2"].set()  # o-2 refused now: nothing of it counts any more
    await tabs[1]
    await asyncio.sleep(0.01)
    with h.acting_for(BOB):
        await run(_shop(h, ran, "o-5"), "refund")
    assert [a["order_id"] for a in ran.of("refund")] == ["o-3", "o-4"], ran


async def test_control_units_given_back_in_the_order_taken_free_no_later_callers_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control of the one above: o-2's unit given back first, then o-1's
    after its window passed; the third refund at that instant is refused."""
    clock, store = _fake_minute(monkeypatch)
    h, gates, waiting, ran = _fraud_checked_refunds(store, per_min=2)
    tabs = await _alices_two_tabs(h, ran, waiting)
    gates["o-2"].set()
    await tabs[1]
    await asyncio.sleep(0.01)
    clock.now += 30
    for who, order in ((BOB, "o-3"), (CAROL, "o-4")):
        with h.acting_for(who):
            await run(_shop(h, ran, order), "refund")
    gates["o-1"].set()
    await tabs[0]
    await asyncio.sleep(0.01)
    with h.acting_for(BOB):
        await run(_shop(h, ran, "o-5"), "refund")
    assert [a["order_id"] for a in ran.of("refund")] == ["o-3", "o-4"], ran


# ====================================================== 3. the abandoned local probe, the store down


class _BreakersDown:
    """A shared store (not in-process) whose breaker calls fail (Redis down
    for them): each process's own breaker decides."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def breaker_allow(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("breaker store unreachable")

    async def breaker_record(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("breaker store unreachable")


async def test_an_abandoned_local_probe_with_the_store_down_reopens_for_one_cooldown_only() -> None:
    """Regression guard (README 'Running many workers': a probe that comes
    to no outcome opens the breaker again for a cooldown): the store is down,
    so the probe is this process's; once a cooldown has passed after it was
    abandoned, the next call probes, runs, and closes the breaker for the next."""
    h = Harness(HarnessConfig(store=_BreakersDown(), breaker_failures=1, breaker_cooldown_s=0.05),
                load_entry_points=False)
    ran, down = Ran(), [True]
    with h.acting_for(ALICE):  # the dependency is down: this process's breaker opens
        await run(_stock_agent(h, ran, down, "SKU-1", "a"), "stock?")
    down[0] = False
    await asyncio.sleep(0.1)
    with h.acting_for(ALICE):  # her call is the probe; she closes the tab before it runs
        await _dropped_at_its_start(_stock_agent(h, ran, down, "SKU-1", "b"))
    early = _stock_agent(h, ran, down, "SKU-9", "early")
    with h.acting_for(CAROL):  # at once: reopened, not probed
        await run(early, "stock?")
    assert h.last_report(early).refusals == {"dependency_down": 1}
    await asyncio.sleep(0.1)
    for who, sku in ((BOB, "SKU-2"), (CAROL, "SKU-3")):
        agent = _stock_agent(h, ran, down, sku, sku)
        with h.acting_for(who):
            await run(agent, "stock?")
        assert h.last_report(agent).refusals == {}
    assert [a["sku"] for a in ran.of("inventory")] == ["SKU-1", "SKU-2", "SKU-3"]

"""The runtime around the hooks: failure policy, timeouts, shadow mode, the
kill switch, env flags, HITL park/resume, failures, cancellation, nesting and
the deadline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool
from scripted import (
    RAN,
    ScriptedModel,
    calls,
    decisions,
    delegating_tool,
    make_agent,
    run,
    search,
    slow,
    text,
    tool_messages,
)

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HarnessConfigError,
    HookContext,
    HookRejectSignal,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
    clamp_timeout,
    harness_hook,
    remaining_time,
)
from agentscope_harness.config import EnvFlags

# ---------------------------------------------------------------- failures

@harness_hook("pre_tool_call", priority=25, name="broken_safety", kind="safety")
def broken_safety(ctx: HookContext) -> None:
    raise RuntimeError("policy service exploded")


@harness_hook("pre_tool_call", priority=25, name="broken_observer", kind="observer")
def broken_observer(ctx: HookContext) -> None:
    raise RuntimeError("metrics exploded")


@harness_hook("pre_tool_call", priority=25, name="hanging_safety", kind="safety")
async def hanging_safety(ctx: HookContext) -> None:
    await asyncio.sleep(10)


async def test_a_failing_safety_gate_fails_closed() -> None:
    harness = Harness(hooks=[broken_safety])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("sorry")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert RAN == []
    assert tool_messages(model.calls[1])[0].startswith("[harness:policy_error]")
    report = harness.last_report(agent)
    assert report.refusals == {"policy_error": 1}
    assert any(d.action == "error" and "exploded" in d.detail for d in report.decisions)


async def test_a_failing_observer_fails_open() -> None:
    harness = Harness(hooks=[broken_observer])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert RAN == ["a"]
    report = harness.last_report(agent)
    assert report.refusals == {}
    assert [d.action for d in report.decisions if d.hook == "broken_observer"] == ["error"]


async def test_a_hanging_safety_gate_times_out_and_fails_closed() -> None:
    harness = Harness(HarnessConfig(hook_timeout_s=0.05), hooks=[hanging_safety])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("sorry")])
    agent = make_agent(model, [search], harness.middlewares())
    started = time.monotonic()
    await run(agent)
    assert time.monotonic() - started < 2
    assert RAN == []
    assert "timed out" in harness.last_report(agent).decisions[0].detail


async def test_a_hook_that_waits_then_hangs_times_out_and_one_that_waits_briefly_finishes() -> None:
    """The timer is armed only once a hook waits: a hook that waits a few
    times and finishes is not cut, one that waits and then hangs is."""
    from agentscope_harness.runner import HookRunner

    steps: list[str] = []

    async def brief(ctx: Any) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        steps.append("brief done")

    async def hangs_later(ctx: Any) -> None:
        await asyncio.sleep(0)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            steps.append("cancelled")
            raise

    runner = HookRunner([], escape_after_rejects=3, hook_timeout_s=0.05, shadow=False)
    await runner.bounded(brief(None), None)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await runner.bounded(hangs_later(None), None)
    assert time.monotonic() - started < 1
    assert steps == ["brief done", "cancelled"]


async def test_a_hooks_synchronous_first_step_counts_against_its_timeout() -> None:
    """Red team: the timer is armed after the first step, so that step's
    time is taken off the limit; a hook that used it all fails at once."""
    from agentscope_harness.runner import HookRunner

    async def slow_setup_then_hangs(ctx: Any) -> None:
        time.sleep(0.3)  # synchronous work: cannot be interrupted
        await asyncio.sleep(30)

    runner = HookRunner([], escape_after_rejects=3, hook_timeout_s=0.2, shadow=False)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await runner.bounded(slow_setup_then_hangs(None), None)
    assert time.monotonic() - started < 0.5


# ------------------------------------------------------------- shadow, kill

async def test_a_hook_cannot_change_the_arguments_the_gates_judge() -> None:
    # the tool receives AgentScope's own arguments: an edit a hook made would
    # only change what the later gates judge (here, whose order it is)
    ran: list[tuple[str, str]] = []

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        ran.append((order_id, user_id))
        return "cancelled"

    @harness_hook("pre_tool_call", priority=3, name="fill_signed_in_user", kind="transform")
    def fill_signed_in_user(ctx: HookContext) -> None:
        assert ctx.tool is not None and ctx.principal is not None
        ctx.tool.args["user_id"] = ctx.principal.user_id  # type: ignore[index]

    harness = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"})}), hooks=[fill_signed_in_user])
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-9", "user_id": "u-77"})), text("done")])
    agent = make_agent(model, [cancel_order], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42")):
        await run(agent)
    assert ran == []
    assert tool_messages(model.calls[1])[0].startswith("[harness:permission_denied]")
    report = harness.last_report(agent)
    assert report.refusals == {"permission_denied": 1}
    assert any(d.hook == "fill_signed_in_user" and d.action == "error" and "does not support item assignment"
               in d.detail for d in report.decisions)


async def test_a_safety_hook_that_returns_its_refusal_instead_of_raising_it_still_refuses() -> None:
    @harness_hook("pre_tool_call", priority=25, name="returns_refusal", kind="safety")
    def returns_refusal(ctx: HookContext) -> Any:
        return HookRejectSignal("Not today.", code="policy_refused")

    harness = Harness(hooks=[returns_refusal])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("sorry")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert RAN == []
    assert tool_messages(model.calls[1])[0] == "[harness:policy_refused] Not today."


@pytest.mark.parametrize("kind", ["safety", "observer"])
async def test_a_hook_that_returns_a_value_fails_by_its_kind(kind: str) -> None:
    @harness_hook("pre_tool_call", priority=25, name="returns_value", kind=kind)
    async def returns_value(ctx: HookContext) -> Any:
        return False  # meant as "refuse": hooks return None and raise to refuse

    harness = Harness(hooks=[returns_value])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    report = harness.last_report(agent)
    actions = [d.action for d in report.decisions if d.hook == "returns_value"]
    assert actions == (["error", "refuse"] if kind == "safety" else ["error"])
    assert "returned bool" in next(d.detail for d in report.decisions if d.hook == "returns_value")
    assert RAN == ([] if kind == "safety" else ["a"])


async def test_a_hook_that_sets_the_answer_to_a_non_text_fails_and_the_answer_before_it_stands() -> None:
    @harness_hook("on_session_end", priority=50, name="ticket_number", kind="transform")
    def ticket_number(ctx: HookContext) -> None:
        ctx.final_text = 12345  # type: ignore[assignment]

    harness = Harness(hooks=[ticket_number])
    agent = make_agent(ScriptedModel([text("Your order is on its way.")]), [search], harness.middlewares())
    _, final = await run(agent)
    assert final.get_text_content() == "Your order is on its way."
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert any(d.hook == "ticket_number" and d.action == "error" and "final_text to int" in d.detail
               for d in report.decisions)


def test_a_generator_hook_is_refused_at_construction() -> None:
    async def gate(ctx: HookContext) -> Any:  # its body would never run
        yield None

    with pytest.raises(HarnessConfigError, match="'gate': a hook is a function or a coroutine function"):
        harness_hook("pre_tool_call", kind="safety")(gate)


async def test_shadow_mode_records_but_enforces_nothing() -> None:
    harness = Harness(HarnessConfig(
        mode="shadow",
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=1)},
    ))
    model = ScriptedModel([calls(("search", {"q": "a"}), ("search", {"q": "b"})), text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    events, _ = await run(agent)
    assert sorted(RAN) == ["a", "b"]
    assert all("[harness:" not in m for m in tool_messages(model.calls[1]))
    # data protection is not a gate: the fence (and the rule that explains it) stay on
    assert all(m.startswith("<tool-output nonce=") for m in tool_messages(model.calls[1]))
    assert "Harness rules" in model.calls[0]["formatted"][0]["content"][0]["text"]
    report = harness.last_report(agent)
    refusals = [d for d in report.decisions if d.action == "refuse"]
    assert len(refusals) == 1 and refusals[0].enforced is False
    assert report.refusals == {}
    assert any(d["enforced"] is False for d in decisions(events))


async def test_shadow_mode_never_ends_completed_without_the_contract() -> None:
    harness = Harness(HarnessConfig(mode="shadow", tools={"submit": ToolPolicy(role="finish")}))
    model = ScriptedModel([text("all done")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert harness.last_report(agent).terminal_state == TerminalState.INCOMPLETE


async def test_kill_switch_passes_everything_through() -> None:
    harness = Harness(
        HarnessConfig(tools={"search": ToolPolicy(ledgers=["r"])}, ledgers={"r": Ledger(cap=0)}),
        environ={"HARNESS_ENABLED": "0"},
    )
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    events, _ = await run(agent)
    assert RAN == ["a"]
    assert tool_messages(model.calls[1]) == ["found a"]
    assert model.calls[0]["formatted"][0]["content"][0]["text"] == "You are a helpful shop assistant."
    assert decisions(events) == []
    assert harness.last_report(agent) is None


# ---------------------------------------------------------------- env flags

def test_env_flags_parse() -> None:
    flags = EnvFlags.read({
        "HARNESS_ENABLED": "true", "HARNESS_MODE": "Shadow",
        "HARNESS_DISABLED_HOOKS": " search_gate, drift_detector ,", "HARNESS_DEADLINE_ENABLED": "0",
    })
    assert flags == EnvFlags(True, "shadow", frozenset({"search_gate", "drift_detector"}), False)


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"HARNESS_ENABLED": "maybe"}, "HARNESS_ENABLED"),
        ({"HARNESS_MODE": "loud"}, "HARNESS_MODE"),
        ({"HARNESS_DEADLINE_ENABLED": "2"}, "HARNESS_DEADLINE_ENABLED"),
        ({"HARNESS_DISABLED_HOOKS": "search_gate,no_such_hook"}, "no_such_hook"),
    ],
)
def test_bad_env_values_fail_at_construction_naming_them(env: dict, names: str) -> None:
    with pytest.raises(HarnessConfigError, match=names):
        Harness(environ=env)


def test_env_overrides_are_read_once_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_DISABLED_HOOKS", "search_gate")
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    harness = Harness()
    monkeypatch.setenv("HARNESS_MODE", "enforce")
    assert harness.config.mode == "shadow" and harness.shadow
    assert "search_gate" not in {h.name for h in harness.hooks}
    assert len(harness.hooks) == 24


def test_invalid_config_fails_naming_the_field() -> None:
    with pytest.raises(ValueError, match="cap"):
        HarnessConfig(ledgers={"r": Ledger(cap=-1)})
    with pytest.raises(ValueError, match="tools.search.ledgers"):
        HarnessConfig(tools={"search": ToolPolicy(ledgers=["nope"])})
    with pytest.raises(ValueError, match="rol"):
        ToolPolicy(rol="retrieval")
    with pytest.raises(HarnessConfigError, match="disabled_hooks"):
        Harness(HarnessConfig(disabled_hooks={"not_a_hook"}))


# --------------------------------------------------------------- HITL park

async def test_hitl_park_keeps_the_run_and_resumption_continues_it() -> None:
    harness = Harness()
    asking = FunctionTool(search)  # no permission given: AgentScope asks the user
    model = ScriptedModel([calls(("search", {"q": "a"})), text("found it")])
    agent = make_agent(model, [asking], harness.middlewares())
    events, final = await run(agent)
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    parked = harness.last_report(agent)
    assert parked.terminal_state == TerminalState.WAITING_INPUT
    assert len(harness.table) == 1
    run_id = agent.state.reply_id

    confirm = UserConfirmResultEvent(
        reply_id=ask.reply_id,
        confirm_results=[ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0])],
    )
    _, final = await run(agent, inputs=confirm)
    report = harness.last_report(agent)
    assert final.get_text_content() == "found it"
    assert report.run_id == run_id == parked.run_id
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.tool_calls == {"search": 1}
    assert report.model_calls == 2
    assert len(harness.table) == 0


# ------------------------------------------------- failure and cancellation

async def test_an_exception_inside_the_reply_settles_the_run_as_failed() -> None:
    harness = Harness()
    model = ScriptedModel([calls(("search", {"q": "a"})), RuntimeError("provider 500")])
    agent = make_agent(model, [search], harness.middlewares())
    with pytest.raises(RuntimeError, match="provider 500"):
        await agent.reply(UserMsg("user", "hi"))
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert len(harness.table) == 0

    model.script = [text("recovered")]
    final = await agent.reply(UserMsg("user", "again"))
    assert final.get_text_content() == "recovered"
    assert harness.last_report(agent).terminal_state == TerminalState.COMPLETED


async def test_a_cancelled_reply_settles_as_cancelled_with_in_flight_calls() -> None:
    harness = Harness()
    model = ScriptedModel([calls(("slow", {"seconds": 5}), ("slow", {"seconds": 6})), text("late")])
    agent = make_agent(model, [slow], harness.middlewares())
    task = asyncio.create_task(agent.reply(UserMsg("user", "wait")))
    await asyncio.sleep(0.2)
    task.cancel()
    final = await task
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.CANCELLED
    assert len(report.in_flight) == 2 and all(c.startswith("slow:") for c in report.in_flight)
    assert final.finished_reason == "interrupted"
    assert len(harness.table) == 0
    results = [b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock)]
    assert len(results) == 2

    model.script = [text("next")]
    _, again = await run(agent, "next")
    assert again.get_text_content() == "next"


# ------------------------------------------------------ nesting, deadlines

async def test_a_sub_agent_shares_the_parents_budget_deadline_and_report() -> None:
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=2)},
        deadline_s=30,
    ))
    child_model = ScriptedModel([calls(("search", {"q": "c1"}), ("search", {"q": "c2"})), text("child done")])
    child = make_agent(child_model, [search], harness.middlewares(), name="researcher")
    seen_deadline: list[float | None] = []

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        seen_deadline.append(remaining_time())
        msg = await child.reply(UserMsg("parent", task))
        return msg.get_text_content()

    parent_model = ScriptedModel([
        calls(("delegate", {"task": "find"})),
        calls(("search", {"q": "p1"})),
        text("parent done"),
    ])
    parent = make_agent(parent_model, [delegate, search], harness.middlewares(), name="lead")
    await run(parent)
    report = harness.last_report(parent)
    assert sorted(RAN) == ["c1", "c2"]
    assert tool_messages(parent_model.calls[2])[-1].startswith("[harness:quota_exhausted]")
    assert [c.agent for c in report.children] == ["researcher"]
    assert report.children[0].tool_calls == {"search": 2}
    assert report.model_calls == 5  # 3 own + 2 of the child
    assert 0 < seen_deadline[0] <= 30
    assert len(harness.table) == 0
    # the lead's result of the call that ran it says how the sub-agent's run ended (DESIGN 6.1)
    [result] = [b for m in parent.state.context if not isinstance(m.content, str) for b in m.content
                if isinstance(b, ToolResultBlock) and b.name == "delegate"]
    [sub_run] = result.metadata["harness"]["sub_runs"]
    child_report = report.children[0]
    assert sub_run == {"run_id": child_report.run_id, "agent": "researcher",
                       "terminal_state": child_report.terminal_state.value, "reason": child_report.reason}
    assert (sub_run["terminal_state"], sub_run["reason"]) == ("completed", "answered")


async def test_a_task_a_tool_starts_keeps_the_run_deadline_after_the_run() -> None:
    """Red team: a background task a tool starts reads the deadline through
    the run's handle; once the run is settled and freed the task keeps the
    run's last deadline (it waited unbounded: ``clamp_timeout(None)`` was
    ``None``)."""
    import gc

    go = asyncio.Event()
    seen: list[float | None] = []

    async def later() -> None:
        seen.append(remaining_time())
        await go.wait()
        seen.append(clamp_timeout(None))

    tasks: list[asyncio.Task[None]] = []

    async def notify(q: str) -> str:
        """Fire and forget.

        Args:
            q (str): What.
        """
        tasks.append(asyncio.create_task(later()))
        return "queued"

    harness = Harness(HarnessConfig(deadline_s=5.0), load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("notify", {"q": "x"})), text("done")]), [notify], harness.middlewares())
    await run(agent)
    gc.collect()
    assert len(harness.table) == 0
    go.set()
    await asyncio.gather(*tasks)
    during, after = seen
    assert during is not None and after is not None and 0 < after <= during <= 5.0


async def test_a_sub_agent_with_less_time_than_its_own_deadline_is_not_told_to_wrap_up_at_once() -> None:
    """Red team: a child on its own Harness (``deadline_s=10``) called with
    1 s of its parent's left: its default wrap-up window (15 % of 10 s)
    covered all of it, so it was told to conclude before doing anything and
    ended ``stalled``. The default window is a share of the time the run has."""
    parent_h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    child_h = Harness(HarnessConfig(deadline_s=10.0), load_entry_points=False)
    child_model = ScriptedModel([calls(("search", {"q": "c1"})), text("child done")])
    child = make_agent(child_model, [search], child_h.middlewares(), name="researcher")
    delegate = delegating_tool(child)

    parent = make_agent(ScriptedModel([calls(("delegate", {"task": "find"})), text("parent done")]), [delegate],
                        parent_h.middlewares(), name="lead")
    await run(parent)
    report = child_h.last_report(child)
    assert RAN == ["c1"]
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert not [d for d in report.decisions if d.action == "constrain"]
    # the budget status line keeps the same window: no "time is short" line either
    assert not any("[harness:budget]" in str(turn.formatted) for turn in child_model.calls)


async def test_clamp_timeout_follows_the_run_deadline() -> None:
    seen: list[tuple[float | None, float | None]] = []

    async def timed(limit: float) -> str:
        """Clamp a timeout.

        Args:
            limit (float): The tool's own timeout.
        """
        seen.append((clamp_timeout(limit), remaining_time()))
        return "ok"

    assert clamp_timeout(3.0) == 3.0 and remaining_time() is None
    harness = Harness(HarnessConfig(deadline_s=1.0))
    model = ScriptedModel([calls(("timed", {"limit": 60})), text("ok")])
    await run(make_agent(model, [timed], harness.middlewares()))
    clamped, left = seen[0]
    assert 0.05 <= clamped <= 1.0 and clamped <= left + 1e-3
    assert remaining_time() is None

    off = Harness(HarnessConfig(deadline_s=1.0), environ={"HARNESS_DEADLINE_ENABLED": "0"})
    model = ScriptedModel([calls(("timed", {"limit": 60})), text("ok")])
    await run(make_agent(model, [timed], off.middlewares()))
    assert seen[1] == (60, None)


async def test_report_callback_and_bounded_history() -> None:
    got = []
    harness = Harness(HarnessConfig(on_report=got.append, reports_kept=2))
    agent = make_agent(ScriptedModel([text("1"), text("2"), text("3")]), [search], harness.middlewares())
    for prompt in "abc":
        await run(agent, prompt)
    assert [r.terminal_state for r in got] == [TerminalState.COMPLETED] * 3
    assert len(harness.reports) == 2 and harness.reports[-1] is got[-1]


def test_custom_hooks_are_ordered_by_priority_then_name() -> None:
    @harness_hook("pre_think", priority=7, name="b_hook")
    def b(ctx: HookContext) -> None:  # pragma: no cover - not run
        pass

    @harness_hook("pre_think", priority=7, name="a_hook")
    def a(ctx: HookContext) -> None:  # pragma: no cover - not run
        pass

    harness = Harness(hooks=[b, a])
    names = [s.name for s in harness.runner.by_point["pre_think"]]
    assert names == ["liveness_watchdog", "a_hook", "b_hook", "tool_result_pruner", "budget_router"]


def test_a_refusal_ends_the_points_chain() -> None:
    seen: list[str] = []

    @harness_hook("pre_tool_call", priority=1, name="first")
    def first(ctx: HookContext) -> None:
        seen.append("first")
        raise HookRejectSignal("no", code="policy_refused")

    @harness_hook("pre_tool_call", priority=2, name="second")
    def second(ctx: HookContext) -> None:  # pragma: no cover - must not run
        seen.append("second")

    harness = Harness(hooks=[first, second])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    asyncio.run(run(make_agent(model, [search], harness.middlewares())))
    assert seen == ["first"]


async def test_parallel_sub_agents_each_end_in_the_result_of_their_own_call() -> None:
    """Two sub-agents run by one parallel batch, the first finishing last:
    each lead result names the run its own call ran (the call is known to
    the nested run through the task's context, not by order)."""
    harness = Harness(HarnessConfig(), load_entry_points=False)
    kids = {who: make_agent(ScriptedModel([text(f"{who} done")]), [search], harness.middlewares(), name=who)
            for who in ("slow", "fast")}

    async def delegate(who: str) -> str:
        """Ask a sub-agent.

        Args:
            who (str): Which one.
        """
        await asyncio.sleep(0.02 if who == "slow" else 0.0)
        return (await kids[who].reply(UserMsg("lead", "go"))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"who": "slow"}), ("delegate", {"who": "fast"})),
                                     text("both done")]), [delegate], harness.middlewares(), name="lead")
    await run(lead)
    results = [b for m in lead.state.context if not isinstance(m.content, str) for b in m.content
               if isinstance(b, ToolResultBlock)]
    told = {("slow" if "slow done" in str(b.output) else "fast"): b.metadata["harness"]["sub_runs"] for b in results}
    by_agent = {c.agent: c.run_id for c in harness.last_report(lead).children}
    assert {who: [r["run_id"] for r in runs] for who, runs in told.items()} == {
        "slow": [by_agent["slow"]], "fast": [by_agent["fast"]]}

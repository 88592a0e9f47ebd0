"""Faults: tools, hooks, the model, cancellation and the store failing. The
reply ends in the right terminal state, the next reply on the same agent is
well-formed (every tool call has exactly one result, no orphaned call is
sent to the provider), and the breaker and ledgers stay consistent."""

from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from relkit import (
    assert_context_well_formed,
    assert_payload_well_formed,
    results_by_id,
)
from scripted import (
    RAN,
    STORE_DOWN,
    ScriptedModel,
    calls,
    make_agent,
    run,
    search,
    slow,
    text,
    tool,
    tool_messages,
)

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)


class Custom(Exception):
    pass


class Fatal(BaseException):
    """Not an ``Exception``: AgentScope's toolkit does not catch it."""


def raising(exc: BaseException):
    async def flaky(q: str) -> str:
        """A tool that fails.

        Args:
            q (str): The query.
        """
        RAN.append(f"flaky:{q}")
        raise exc

    return flaky


def ledger_config(**kw) -> HarnessConfig:
    return HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval", ledgers=["r"]),
            "flaky": ToolPolicy(role="retrieval", ledgers=["r"]),
            "slow": ToolPolicy(role="retrieval", ledgers=["r"]),
        },
        ledgers={"r": Ledger(cap=3)},
        **kw,
    )


async def next_reply_is_well_formed(agent, model, harness: Harness, expect_search: bool = True) -> None:
    """The next reply on the same agent: a search then an answer; the model
    is sent a payload without orphans; the run is fresh (full ledger)."""
    before = len(model.calls)
    model.script = [calls(("search", {"q": "next"})), text("next answer")] if expect_search else [text("next answer")]
    _, final = await run(agent, "and now?")
    assert final.get_text_content() == "next answer"
    for call in model.calls[before:]:
        assert_payload_well_formed(call)
    assert_context_well_formed(agent)
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.refusals == {}
    if expect_search:
        assert report.tool_calls == {"search": 1}
        assert "found next" in tool_messages(model.calls[-1])[-1]
    assert len(harness.table) == 0


# ------------------------------------------------------------------ tools

@pytest.mark.parametrize("exc", [ValueError("bad value"), KeyError("missing"), Custom("custom"),
                                 ConnectionError("db down"), TimeoutError()])
@pytest.mark.parametrize("instrument", [False, True])
async def test_a_tool_raising_any_exception_gives_an_error_result(exc: Exception, instrument: bool) -> None:
    harness = Harness(ledger_config())
    model = ScriptedModel([calls(("flaky", {"q": "a"}), ("search", {"q": "b"})), text("sorry")])
    agent = make_agent(model, [raising(exc), search], harness.middlewares())
    if instrument:
        harness.instrument(agent.toolkit)
    _, final = await run(agent)
    report = harness.last_report(agent)
    if instrument and isinstance(exc, ConnectionError):
        # classified dependency_down: the run says so instead of "completed",
        # and the user gets the fallback with what the run found
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down")
        assert final.get_text_content().startswith("I could not complete this request (a service it needs")
        assert "- search: found b" in final.get_text_content()
    else:
        assert final.get_text_content() == "sorry"
        assert report.terminal_state == TerminalState.COMPLETED
    assert report.tool_calls == {"flaky": 1, "search": 1}
    assert_context_well_formed(agent)
    msgs = tool_messages(model.calls[1])
    assert len(msgs) == 2 and any("found b" in m for m in msgs)
    if instrument and isinstance(exc, (ConnectionError, TimeoutError)):
        # a failure of the dependency: the breaker counts it, but stays closed
        assert harness.breakers["flaky"].failures == 1 and harness.breakers["flaky"].opened_at is None
    else:
        # the caller's arguments or the tool's own bug: never the shared breaker's business
        assert "flaky" not in harness.breakers
    await next_reply_is_well_formed(agent, model, harness)


async def test_repeated_tool_failures_open_the_breaker_across_runs() -> None:
    harness = Harness(ledger_config(breaker_failures=2))
    model = ScriptedModel([])
    agent = make_agent(model, [raising(ConnectionError("down")), search], harness.middlewares())
    harness.instrument(agent.toolkit)  # keeps the class that makes it a dependency failure
    for i in range(2):
        model.script = [calls(("flaky", {"q": f"x{i}"})), text("sorry")]
        await run(agent)
    assert harness.breakers["flaky"].opened_at is not None
    # the next run's call is refused without running, and not charged
    RAN.clear()
    model.script = [calls(("flaky", {"q": "z"}), ("search", {"q": "s"})), text("sorry")]
    await run(agent)
    assert RAN == ["s"]
    report = harness.last_report(agent)
    assert report.refusals == {"dependency_down": 1} and report.tool_calls == {"search": 1}
    assert harness.breakers["flaky"].failures == 2
    assert_context_well_formed(agent)
    await next_reply_is_well_formed(agent, model, harness)


@pytest.mark.parametrize("concurrent", [True, False])
async def test_a_tool_raising_a_base_exception(concurrent: bool) -> None:
    """AgentScope only catches ``Exception``: a ``BaseException`` from a
    sequential tool escapes the reply (which ends ``failed``); in a
    concurrent batch AgentScope drops it. Either way the context is closed."""
    harness = Harness(ledger_config())
    model = ScriptedModel([calls(("flaky", {"q": "a"}), ("search", {"q": "b"})), text("after")])
    tools = [tool(raising(Fatal("fatal")), is_concurrency_safe=concurrent),
             tool(search, is_concurrency_safe=concurrent)]
    agent = make_agent(model, tools, harness.middlewares())
    if concurrent:
        _, final = await run(agent)
        assert final.get_text_content() == "after"
        assert harness.last_report(agent).terminal_state == TerminalState.COMPLETED
    else:
        with pytest.raises(Fatal):
            await run(agent)
        report = harness.last_report(agent)
        assert report.terminal_state == TerminalState.FAILED and "Fatal" in report.reason
        assert RAN == ["flaky:a"]
    assert_context_well_formed(agent)
    assert len(harness.table) == 0
    await next_reply_is_well_formed(agent, model, harness)


# ------------------------------------------------------------------ hooks

def make_raising_hook(point: str, kind: str, hang: bool | str = False):
    """A hook that raises, hangs, or (``hang="swallow"``) hangs in a bare
    ``except`` that also catches the timeout's cancellation and returns;
    ``hang="cancelled"`` raises ``CancelledError`` of its own (it awaited a
    task someone else cancelled), while its caller's task is not cancelled."""
    name = f"broken_{point}_{kind}_{hang if isinstance(hang, str) else 'hang' if hang else 'raise'}"

    @harness_hook(point, priority=25, name=name, kind=kind)
    async def broken(ctx: HookContext) -> None:
        if hang == "cancelled":
            shared = asyncio.ensure_future(asyncio.sleep(30))
            shared.cancel()
            try:
                await shared
            except asyncio.CancelledError as exc:
                raise asyncio.CancelledError(f"{name} exploded") from exc
        if hang == "swallow":
            try:
                await asyncio.sleep(30)
            except BaseException:  # the sloppy backend call this attacks
                return
        if hang:
            await asyncio.sleep(30)
        raise RuntimeError(f"{name} exploded")

    return broken


POINTS = ["pre_think", "pre_tool_call", "post_tool_call", "post_reflect", "on_session_end"]


@pytest.mark.parametrize("hang", [False, True, "swallow", "cancelled"])
@pytest.mark.parametrize("kind", ["observer", "safety"])
@pytest.mark.parametrize("point", POINTS)
async def test_a_failing_or_hanging_hook(point: str, kind: str, hang: bool | str) -> None:
    harness = Harness(ledger_config(hook_timeout_s=0.02), hooks=[make_raising_hook(point, kind, hang)])
    model = ScriptedModel([calls(("search", {"q": "a"})), text("the answer")])
    agent = make_agent(model, [search], harness.middlewares())
    _, final = await asyncio.wait_for(run(agent), 10)
    report = harness.last_report(agent)
    errors = [d for d in report.decisions if d.action == "error"]
    timed_out = hang in (True, "swallow")
    assert errors and all(("timed out" if timed_out else "exploded") in d.detail for d in errors)
    closed = kind == "safety"
    if point in ("pre_think", "post_reflect") and closed:
        # no call to refuse: a safety hook that fails there stops the run
        assert RAN == []
        assert report.terminal_state == TerminalState.INCOMPLETE and report.reason == "policy_error"
        assert final.get_text_content() == harness.config.fallback_text.format(reason="a safety check could not run")
        assert len(model.calls) == (0 if point == "pre_think" else 1)
        assert_context_well_formed(agent)
        assert len(harness.table) == 0
        return
    if point == "pre_tool_call" and closed:
        assert RAN == [] and report.refusals == {"policy_error": 1}
        assert tool_messages(model.calls[1])[0].startswith("[harness:policy_error]")
    elif point == "post_tool_call" and closed:
        assert RAN == ["a"] and report.refusals == {"policy_error": 1}
        assert tool_messages(model.calls[1])[0].startswith("[harness:policy_error]")
        assert "found a" not in tool_messages(model.calls[1])[0]
    else:
        assert RAN == ["a"]
        assert "found a" in tool_messages(model.calls[1])[0]
    if point == "on_session_end" and closed:
        assert report.terminal_state == TerminalState.INCOMPLETE and report.reason == "audit_failed"
        assert final.get_text_content() != "the answer"
    else:
        assert final.get_text_content() == "the answer"
        assert report.terminal_state == TerminalState.COMPLETED
    assert len(model.calls) == 2
    assert_context_well_formed(agent)
    assert len(harness.table) == 0


# ------------------------------------------------------------------ model

@pytest.mark.parametrize("when", [0, 1])
async def test_the_model_call_raising(when: int) -> None:
    harness = Harness(ledger_config())
    script = [calls(("search", {"q": "a"}), ("search", {"q": "b"})), text("never")]
    script[when] = RuntimeError("provider 500")
    model = ScriptedModel(script)
    agent = make_agent(model, [search], harness.middlewares())
    with pytest.raises(RuntimeError, match="provider 500"):
        await agent.reply(UserMsg("user", "hi"))
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert report.model_calls == when + 1
    assert report.tool_calls == ({"search": 2} if when else {})
    assert_context_well_formed(agent)
    assert len(harness.table) == 0
    await next_reply_is_well_formed(agent, model, harness)


async def test_the_model_raising_mid_stream() -> None:
    harness = Harness(ledger_config())

    class Breaking(ScriptedModel):
        async def _stream(self, res):
            yield res.__class__(content=res.content[:1], is_last=False)
            raise ConnectionError("stream reset")

    model = Breaking([calls(("search", {"q": "a"})), text("never")], stream=True)
    agent = make_agent(model, [search], harness.middlewares())
    with pytest.raises(ConnectionError):
        await run(agent)
    assert harness.last_report(agent).terminal_state == TerminalState.FAILED
    assert_context_well_formed(agent)
    model.stream = False
    await next_reply_is_well_formed(agent, model, harness)


# ----------------------------------------------------------- cancellation

@pytest.mark.parametrize("concurrent", [True, False])
async def test_a_reply_cancelled_mid_tool(concurrent: bool) -> None:
    harness = Harness(ledger_config())
    model = ScriptedModel([
        calls(("slow", {"seconds": 5}), ("slow", {"seconds": 6}), ("search", {"q": "c"})),
        text("late"),
    ])
    tools = [tool(slow, is_concurrency_safe=concurrent), tool(search, is_concurrency_safe=concurrent)]
    agent = make_agent(model, tools, harness.middlewares())
    task = asyncio.create_task(run(agent, "wait"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if "slow:start" in RAN:
            break
    await asyncio.sleep(0.05)
    task.cancel()
    _, final = await task
    assert final.finished_reason == "interrupted"
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.CANCELLED
    assert "slow:end" not in RAN
    if concurrent:
        assert RAN.count("slow:start") == 2 and len(report.in_flight) == 2
    else:
        assert RAN == ["slow:start"] and len(report.in_flight) == 1
    assert all(c.startswith("slow:") for c in report.in_flight)
    assert_context_well_formed(agent)
    results = results_by_id(agent)
    assert len(results) == 3
    assert len(harness.table) == 0
    assert harness.breakers == {}  # an interruption says nothing about the tool
    await next_reply_is_well_formed(agent, model, harness)


async def test_cancelled_awaiting_reply_via_task_cancel_raising() -> None:
    """With ``interruption_raise_cancelled_error`` the CancelledError leaves
    the reply: still cancelled, still closed."""
    from agentscope.agent import ReActConfig

    harness = Harness(ledger_config())
    model = ScriptedModel([calls(("slow", {"seconds": 5})), text("late")])
    agent = make_agent(model, [slow, search], harness.middlewares())
    agent.react_config = ReActConfig(max_iters=50, interruption_raise_cancelled_error=True)
    task = asyncio.create_task(agent.reply(UserMsg("user", "wait")))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert harness.last_report(agent).terminal_state == TerminalState.CANCELLED
    assert_context_well_formed(agent)
    assert len(harness.table) == 0
    await next_reply_is_well_formed(agent, model, harness)


# ------------------------------------------------------------------ store

class DownStore:
    def __init__(self, get_fails: bool = True, add_fails: bool = True) -> None:
        self.get_fails, self.add_fails = get_fails, add_fails
        self.added: list[float] = []

    async def get_spend(self, key: str, day: str | None = None) -> float:
        if self.get_fails:
            raise ConnectionError("redis unreachable")
        return 0.0

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        if self.add_fails:
            raise ConnectionError("redis unreachable")
        self.added.append(usd)
        return sum(self.added)


async def test_a_store_that_is_down_fails_the_budget_closed() -> None:
    store = DownStore()
    harness = Harness(HarnessConfig(
        store=store, cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)}),
    ))
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    agent = make_agent(model, [search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u")):
        _, final = await run(agent)
    assert model.calls == [] and RAN == []
    assert final.get_text_content().startswith(STORE_DOWN)
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.INCOMPLETE
    assert report.reason == "dependency_down"
    # which store, and why: said once, in the read's own decision
    [read] = [d for d in report.decisions if d.detail.startswith("daily spend not read")]
    assert read.code == "dependency_down" and "spend store (DownStore) is unavailable" in read.detail
    assert "redis unreachable" in read.detail
    assert_context_well_formed(agent)
    assert len(harness.table) == 0
    # the store is back: the next reply runs normally
    store.get_fails = store.add_fails = False
    with harness.acting_for(Principal(user_id="u")):
        await next_reply_is_well_formed(agent, model, harness)
    assert store.added and all(usd > 0 for usd in store.added)  # charged per model call


async def test_a_store_failing_on_charge_fails_the_budget_closed_at_the_next_call() -> None:
    store = DownStore(get_fails=False, add_fails=True)
    harness = Harness(HarnessConfig(
        store=store, cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)}),
    ))
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    agent = make_agent(model, [search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u")):
        _, final = await run(agent)
    # the first call's spend could not be charged: no second model call
    assert len(model.calls) == 1 and RAN == ["a"]
    assert final.get_text_content().startswith(STORE_DOWN)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down")
    assert any(d.code == "dependency_down" and "not charged" in d.detail for d in report.decisions)
    assert_context_well_formed(agent)
    assert len(harness.table) == 0


async def test_a_failing_report_callback_does_not_break_the_reply() -> None:
    def boom(report) -> None:
        raise RuntimeError("callback exploded")

    harness = Harness(HarnessConfig(on_report=boom))
    model = ScriptedModel([calls(("search", {"q": "a"})), text("fine")])
    agent = make_agent(model, [search], harness.middlewares())
    _, final = await run(agent)
    assert final.get_text_content() == "fine"
    assert harness.last_report(agent).terminal_state == TerminalState.COMPLETED
    await next_reply_is_well_formed(agent, model, harness)

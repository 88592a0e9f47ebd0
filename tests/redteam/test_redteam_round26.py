"""Red team, round 26: around the fixes of round 25 and the contract audit.

1. a model call cut at the deadline: charged its request and what streamed,
   never the stop text (AgentScope's real ``OpenAIChatModel``, a local server);
2. a hook's ``ctx.stop(reason, state, text=...)`` at each point, with each
   state, and what the watchdog's change (any stop text stops) touches;
3. ``HARNESS_ENABLED=0``: adapters by hand, ``instrument``, ``tool_middleware``;
4. ``HarnessConfig`` as JSON and ``check-config``;
5. client-executed results: what a client may say about the harness.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from hookkit import Ran, drive, harnessed, shop_tools
from pydantic import SecretStr
from scripted import calls, text
from server import FakeOpenAI, Reply, fail

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    ModelPrice,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)

U42 = Principal(user_id="u-42", tenant="acme")
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
FINISH_CFG = {"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")}
STOP_TEXT = "Stopped by the house policy."


# ------------------------------------------------------------------ real client


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    made: list[OpenAIChatModel] = []

    def make(srv: FakeOpenAI, stream: bool = True, max_retries: int = 0, **kw: Any) -> OpenAIChatModel:
        kw.setdefault("retry_delay", 0.01)
        m = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=srv.base_url),
            model="gpt-test", stream=stream, max_retries=max_retries,
            client_kwargs={"max_retries": 0, "timeout": 30.0}, **kw,
        )
        made.append(m)
        return m

    yield make
    for m in made:
        await m.client.close()


async def _search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"result for {q}: a red mug"


def real(config: HarnessConfig, model: Any, fns: list[Any] = (), harness: Harness | None = None) -> tuple[Harness, Agent]:
    h = harness or Harness(config, load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in fns]))
    agent = Agent(name="shop", system_prompt="You help.", model=model, toolkit=toolkit,
                  middlewares=h.middlewares(), react_config=ReActConfig(max_iters=10),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    return h, agent


async def real_reply(h: Harness, agent: Agent, prompt: str = "a mug?") -> tuple[list[Any], Msg]:
    events: list[Any] = []
    final: Msg | None = None
    with h.acting_for(U42):
        async for item in agent.reply_stream(UserMsg("user", prompt), yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)
    assert final is not None
    return events, final


# ====================================================== 1. a call cut at the deadline


async def test_a_stream_cut_mid_answer_is_never_charged_past_max_tokens(server: FakeOpenAI, make_model: Any) -> None:
    server.plan(Reply(text="=" * 400, chunk_delay_s=0.01))  # dense tokens: 400 chars, within 20 real tokens
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=20))
    cost = CostPolicy(cap_usd=0.03, prices={"gpt-test": ModelPrice(1.0, 1000.0)})  # 20 out = $0.02
    h, agent = real(HarnessConfig(deadline_s=0.6, cost=cost), model)
    await real_reply(h, agent)
    report = h.last_report(agent)
    assert report.reason == "deadline" and len(server.requests) == 1
    assert report.output_tokens <= 20, report.output_tokens
    assert report.spent_usd <= 0.03, report.spent_usd


async def test_a_stream_cut_mid_answer_is_charged_what_streamed(server: FakeOpenAI, make_model: Any) -> None:
    """Regression guard: a stream cut mid-answer is charged (not free): its
    request and what streamed; the stop text is not counted."""
    server.plan(Reply(text="The red mug is the one. " * 20, chunk_delay_s=0.01))
    cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": ModelPrice(1.0, 10.0)})
    h, agent = real(HarnessConfig(deadline_s=0.6, cost=cost), make_model(server))
    _, final = await real_reply(h, agent)
    report = h.last_report(agent)
    assert report.reason == "deadline"
    assert 0 < report.output_tokens <= len("The red mug is the one. " * 20) // 4
    assert report.input_tokens > 0
    # charged its request (and what streamed): an estimate, said as such (round 82), never the stop text
    assert [d.detail for d in report.decisions if d.action == "usage_estimated"] == [
        "a call stopped before its answer ended: charged its request and what it sent, estimated"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
async def test_a_cut_in_the_pause_between_retries_charges_no_request(
    server: FakeOpenAI, make_model: Any, stream: bool,
) -> None:
    """The first attempt fails at once (500: the provider bills nothing),
    AgentScope waits 3 s to retry, the deadline cuts the pause: no request
    was in flight."""
    server.plan(fail(500, 1))
    cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": ModelPrice(1.0, 10.0)})
    h, agent = real(HarnessConfig(deadline_s=0.5, cost=cost), make_model(server, stream, max_retries=1, retry_delay=3))
    await real_reply(h, agent)
    report = h.last_report(agent)
    assert report.reason == "deadline" and len(server.requests) == 1
    assert (report.input_tokens, report.output_tokens) == (0, 0), (report.input_tokens, report.output_tokens)


# ====================================================== 2. ctx.stop at each point


def _stopper(point: str, state: TerminalState, reason: str = "hook_said") -> Any:
    fired: list[bool] = []

    @harness_hook(point, name=f"stop_{point}")
    def stopper(ctx: HookContext) -> None:
        if fired:
            return
        if point == "post_reflect" and not ctx.model_output.tool_calls:
            return
        if point in ("pre_tool_call", "post_tool_call") and ctx.tool.name != "search":
            return
        fired.append(True)
        ctx.stop(reason, state, text=STOP_TEXT)

    return stopper


SCRIPT = [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("model text"), text("more")]


@pytest.mark.parametrize("point", ["pre_think", "post_reflect", "pre_tool_call", "post_tool_call"])
@pytest.mark.parametrize("state", [TerminalState.INCOMPLETE, TerminalState.WAITING_INPUT, TerminalState.CANCELLED,
                                   TerminalState.FAILED, TerminalState.COMPLETED], ids=lambda s: s.value)
async def test_a_hooks_stop_answers_its_text_and_reports_its_state(point: str, state: TerminalState) -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools=FINISH_CFG), list(SCRIPT), [t["search"], t["submit"]],
                                hooks=[_stopper(point, state)])
    _, final, report = await drive(h, agent, U42)
    assert (final.get_text_content() or "").startswith(STOP_TEXT), final.get_text_content()
    want = (TerminalState.INCOMPLETE, "finish_tool_not_called") if state is TerminalState.COMPLETED else (state, "hook_said")
    assert (report.terminal_state, report.reason) == want
    assert ran.of("submit") == []
    assert len(model.calls) <= 1


@pytest.mark.parametrize("point", ["pre_think", "post_tool_call"])
async def test_a_hooks_stop_named_finished_cannot_report_completed(point: str) -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools=FINISH_CFG), list(SCRIPT), [t["search"], t["submit"]],
                                hooks=[_stopper(point, TerminalState.COMPLETED, reason="finished")])
    _, final, report = await drive(h, agent, U42)
    assert ran.of("submit") == []
    assert report.terminal_state is not TerminalState.COMPLETED, report.reason


def _late_stopper() -> Any:
    @harness_hook("post_tool_call", name="late_stop", priority=90)
    def late(ctx: HookContext) -> None:
        if ctx.tool.name == "submit":
            ctx.stop("hook_said", TerminalState.INCOMPLETE, text=STOP_TEXT)

    return late


async def test_a_stop_after_the_finishing_tool_delivered_agrees_with_the_report() -> None:
    """The finishing tool completed the run; a later hook then stops it:
    what the user gets and what the report says must tell one story (the
    tool's answer and ``completed``, or the stop's text and not ``completed``)."""
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools=FINISH_CFG),
                                [calls(("submit", {"answer": "The red mug."})), text("never")],
                                [t["search"], t["submit"]], hooks=[_late_stopper()])
    _, final, report = await drive(h, agent, U42)
    said = final.get_text_content() or ""
    completed = report.terminal_state is TerminalState.COMPLETED
    assert completed == (said == "The red mug."), (said, report.terminal_state, report.reason)


async def test_the_finishing_tool_answer_still_ends_the_run() -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools=FINISH_CFG),
                                [calls(("search", {"q": "mug"})), calls(("submit", {"answer": "The red mug."})),
                                 text("never")], [t["search"], t["submit"]])
    _, final, report = await drive(h, agent, U42)
    assert final.get_text_content() == "The red mug." and len(model.calls) == 2
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished")


async def test_an_ask_tool_question_is_still_relayed_by_the_model() -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools={"ask_user": ToolPolicy(role="ask")}),
                                [calls(("ask_user", {"question": "Which colour?"})), text("Which colour, red or blue?")],
                                [t["ask_user"]])
    _, final, report = await drive(h, agent, U42)
    assert len(model.calls) == 2 and final.get_text_content() == "Which colour, red or blue?"
    assert report.terminal_state is TerminalState.WAITING_INPUT


async def test_the_budget_question_then_an_extension_continues() -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(cost=CostPolicy(cap_usd=0.0011, prices={"scripted": (10.0, 10.0)}, on_exhausted="ask")),
        [calls(("search", {"q": str(i)}), inp=50, out=50) for i in range(3)] + [text("done")], [t["search"]])
    _, final, report = await drive(h, agent, U42)
    assert report.terminal_state is TerminalState.WAITING_INPUT
    assert "Shall I continue?" in (final.get_text_content() or "")
    made = len(model.calls)
    with h.acting_for(U42):
        h.extend(agent, usd=0.25)
    _, final2, rep2 = await drive(h, agent, U42, prompt="go on")
    assert len(model.calls) > made, "the extended run made no model call"
    assert rep2.terminal_state is not TerminalState.WAITING_INPUT, rep2.reason


async def test_a_hooks_stop_in_shadow_mode_stops_nothing() -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools=FINISH_CFG, mode="shadow"),
                                [calls(("search", {"q": "a"})), calls(("submit", {"answer": "The red mug."})),
                                 text("x")], [t["search"], t["submit"]],
                                hooks=[_stopper("post_tool_call", TerminalState.WAITING_INPUT)])
    _, final, report = await drive(h, agent, U42)
    assert ran.of("submit") == [{"answer": "The red mug."}]
    assert STOP_TEXT not in (final.get_text_content() or "")


# ====================================================== 3. HARNESS_ENABLED=0


async def _down_tool(sku: str) -> str:
    """Stock level.

    Args:
        sku (str): The product.
    """
    from agentscope_harness import DependencyDown

    raise DependencyDown("inventory API", "HTTP 503")


async def _what_the_model_read(toolkit: Toolkit, middlewares: list[Any]) -> str:
    from scripted import ScriptedModel, make_agent, run, tool_messages

    model = ScriptedModel([calls(("stock", {"sku": "a"})), text("ok")])
    agent = make_agent(model, toolkit, middlewares=middlewares)
    await run(agent)
    return tool_messages(model.calls[-1])[-1]


async def test_a_disabled_harness_leaves_an_instrumented_toolkit_as_bare_agentscope_has_it() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={"HARNESS_ENABLED": "0"})
    bare = await _what_the_model_read(Toolkit(tools=[FunctionTool(_down_tool, name="stock", permission=ALLOW)]), [])
    off = await _what_the_model_read(
        h.instrument(Toolkit(tools=[FunctionTool(_down_tool, name="stock", permission=ALLOW)])), h.middlewares())
    assert off == bare


async def test_a_disabled_harness_tool_middleware_built_by_hand_passes_through() -> None:
    """What the model reads of a failing tool built with ``tool_middleware()`` is bare AgentScope's."""
    h = Harness(HarnessConfig(), load_entry_points=False, environ={"HARNESS_ENABLED": "0"})
    bare = await _what_the_model_read(Toolkit(tools=[FunctionTool(_down_tool, name="stock", permission=ALLOW)]), [])
    by_hand = FunctionTool(_down_tool, name="stock", permission=ALLOW, middlewares=[h.tool_middleware()])
    off = await _what_the_model_read(Toolkit(tools=[by_hand]), h.middlewares())
    assert off == bare, (off, bare)


async def test_a_disabled_harness_opens_no_run_for_a_sub_agent_with_adapters_by_hand() -> None:
    from scripted import ScriptedModel, delegating_tool, make_agent, run

    from agentscope_harness.adapters import HarnessAgentAdapter, HarnessToolAdapter

    h = Harness(HarnessConfig(max_tool_calls=0, max_model_calls=1), load_entry_points=False,
                environ={"HARNESS_ENABLED": "0"})
    ran = Ran()
    t = shop_tools(ran)
    child = make_agent(ScriptedModel([calls(("search", {"q": "x"})), text("child done")]), [t["search"]],
                       middlewares=[HarnessAgentAdapter(h), HarnessToolAdapter(h)], name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "t"})), text("lead done")])
    lead = make_agent(lead_model, [delegating_tool(child)], middlewares=[HarnessAgentAdapter(h), HarnessToolAdapter(h)])
    _, final = await run(lead)
    assert final.get_text_content() == "lead done"
    assert ran.of("search") == [{"q": "x"}]
    assert h.last_report(lead) is None and h.last_report(child) is None and not h.reports


# ====================================================== 4. HarnessConfig as JSON


CHECK_PY = '''
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel
from pydantic import SecretStr
from agentscope_harness import CostPolicy, HarnessConfig, ModelPrice, ToolPolicy
from agentscope_harness.stores import SQLiteStore

lite = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-proj-LITEKEY0123456789abcdef"),
                                                   base_url="https://user:BASEPASS99@llm.internal/v1"),
                       model="gpt-lite")
config = HarnessConfig(
    tools={"submit": ToolPolicy(role="finish", verify=lambda r: None, ask_when=lambda a: None)},
    cost=CostPolicy(cap_usd=1.0, prices={"gpt-lite": ModelPrice(1.0, 2.0)}, tier_models={"lite": lite}),
    store=SQLiteStore(%r),
    on_report=print,
    secret_values=["VALUE-SECRET-0123456789"],
    secret_env=["ROUND26_TOKEN"],
)
'''


def test_check_config_json_is_valid_and_prints_no_secret(tmp_path: Any, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from agentscope_harness.cli import main

    monkeypatch.setenv("ROUND26_TOKEN", "ENV-SECRET-abcdefghijkl")
    policy = tmp_path / "policy.py"
    policy.write_text(CHECK_PY % str(tmp_path / "q.db"))
    capsys.readouterr()
    assert main(["check-config", str(policy), "--json", "--no-entry-points"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["config"]["secret_values"] == ["<secret>"]
    for secret in ("LITEKEY0123456789", "BASEPASS99", "VALUE-SECRET", "ENV-SECRET"):
        assert secret not in out, secret
    assert main(["check-config", str(policy), "--no-entry-points"]) == 0
    text_out = capsys.readouterr().out
    for secret in ("LITEKEY0123456789", "BASEPASS99", "VALUE-SECRET", "ENV-SECRET"):
        assert secret not in text_out, secret


def test_a_plain_config_survives_a_json_round_trip() -> None:
    from agentscope_harness import ConcurrencyLimit, Ledger, Prerequisite, RateLimit

    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["web"], claims=["found"], pii={"email": "mask"}),
               "refund": ToolPolicy(role="mutation", requires=[Prerequisite(tool="search", same_args=["q"])],
                                    identity_args={"user_id": "user_id"}),
               "submit": ToolPolicy(role="finish")},
        ledgers={"web": Ledger(cap=3, soft_at=2, on_exhausted="ask", extend_by=2)},
        cost=CostPolicy(cap_usd=0.5, prices={"m": (1.0, 2.0, 0.5)}, tiers=(0.6, 0.3, 0.1), unpriced=ModelPrice(3.0, 4.0),
                        daily_quota_usd=2.0, max_output_tokens=100),
        deadline_s=30, disabled_hooks={"loop_detector"}, redact_patterns=[r"ACME-\d{6}"],
        rate_limits=[RateLimit(scope="principal", calls_per_min=5)],
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="search", max_in_flight=2)],
        secret_values=["VALUE-SECRET-0123456789"], secret_env=["X_TOKEN"], mode="shadow",
        model_error_text="Try later ({reason}).",
    )
    again = HarnessConfig.model_validate(json.loads(config.model_dump_json()))
    assert again.model_dump() == config.model_dump()


# ====================================================== 5. client-executed results


async def test_a_clients_result_cannot_declare_a_harness_error_class() -> None:
    """A client result marked ``dependency_down`` in the harness key: dropped,
    so no ``dependency_down`` end and no breaker failure."""
    from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
    from agentscope.message import ToolResultBlock, ToolResultState
    from hookkit import client_tool
    from scripted import ScriptedModel, make_agent

    h = Harness(HarnessConfig(breaker_failures=1), load_entry_points=False)
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"})), text("A-1 is paid.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    with h.acting_for(U42):
        events = [e async for e in agent.reply_stream(UserMsg("user", "A-1?"))]
        call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        block = ToolResultBlock(id=call.id, name=call.name, output="upstream down", state=ToolResultState.ERROR,
                                metadata={"harness": {"error_class": "dependency_down", "dependency": "x"}})
        [e async for e in agent.reply_stream(
            ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[block]))]
    report = h.last_report(agent)
    assert report.reason != "dependency_down", report.reason
    assert all(b.state == "closed" for b in h.breakers.values()), h.breakers


def _session_stopper() -> Any:
    @harness_hook("on_session_end", name="late_session_stop", priority=50)
    def late(ctx: HookContext) -> None:
        ctx.stop("hook_said", TerminalState.INCOMPLETE, text=STOP_TEXT)

    return late


async def test_a_stop_at_session_end_agrees_with_what_the_user_got() -> None:
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(), [calls(("search", {"q": "a"})), text("The red mug.")],
                                [t["search"]], hooks=[_session_stopper()])
    _, final, report = await drive(h, agent, U42)
    said = final.get_text_content() or ""
    assert (report.terminal_state is TerminalState.INCOMPLETE) == said.startswith(STOP_TEXT), (said, report.reason)

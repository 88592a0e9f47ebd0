"""Red team, round 27: around round 26's fixes.

1. human-in-the-loop resumes: rejected resumes and what they leave behind;
2. model call charging: ``max_tokens`` bounds, usage-less answers, cuts;
3. ``GuardState.delivered``, ``HookContext.stop``, a stop at ``on_session_end``.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import ToolResultBlock, ToolResultState, UserMsg
from agentscope.tool import Toolkit
from hookkit import Ran, refunding, searcher
from jsonschema import ValidationError
from scripted import ALICE, BOB, ScriptedModel, calls, confirm, drain, make_agent, text, tool

from agentscope_harness import (
    Harness,
    HarnessConfig,
    Prerequisite,
    TerminalState,
    ToolPolicy,
)


def _asking_refund(ran: Ran, script: list[Any] | None = None) -> tuple[Harness, Any]:
    """``refund`` with no permission of its own: AgentScope's engine asks."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel(script or [calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares())
    return h, agent


async def _parked(h: Harness, agent: Any) -> Any:
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
    return next(e for e in events if isinstance(e, RequireUserConfirmEvent))


# ====================================================== 1. resumes


def shown_args(call: Any) -> dict[str, Any]:
    return json.loads(call.input)


async def test_another_callers_rejected_resume_then_the_owners_approval_reports_what_ran() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran)
    ask = await _parked(h, agent)
    shown = ask.tool_calls[0]
    with h.acting_for(BOB), pytest.raises(ValueError):
        await drain(agent, confirm(ask, shown.model_copy(update={"id": "call_typo"})))
    with h.acting_for(ALICE):
        await drain(agent, confirm(ask, shown))
    report = h.last_report(agent)
    # the event AgentScope refused resumed nothing: Bob neither ran nor blocked Alice's call
    assert ran.of("refund") == [shown_args(shown)], ran
    assert report.terminal_state is TerminalState.COMPLETED, report.reason
    assert not any(d.code == "permission_denied" for d in report.decisions)


async def test_approve_edit_after_a_rejected_resume_runs_the_edit_once_and_drains() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran)
    ask = await _parked(h, agent)
    shown = ask.tool_calls[0]
    with h.acting_for(ALICE):
        with pytest.raises(ValueError):
            await drain(agent, confirm(ask, shown.model_copy(update={"id": "call_typo"})))
        with h.acting_for(BOB), pytest.raises(PermissionError):
            h.approve_edit(agent, shown, {"order_id": "o-999"})
        edited = h.approve_edit(agent, shown, {"order_id": "o-2"})
        await drain(agent, confirm(ask, edited))
    assert ran.of("refund") == [{"order_id": "o-2"}], ran
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED
    assert len(h.table) == 0


async def test_a_new_reply_after_a_rejected_resume_drops_the_park_and_the_old_confirmation_runs_nothing() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran, [calls(("refund", {"order_id": "o-1"})), text("What else?")])
    ask = await _parked(h, agent)
    shown = ask.tool_calls[0]
    with h.acting_for(ALICE):
        with pytest.raises(ValueError):
            await drain(agent, confirm(ask, shown.model_copy(update={"id": "call_typo"})))
        with pytest.raises(ValueError):  # AgentScope: a new message while a call awaits confirmation
            await drain(agent, UserMsg("user", "never mind"))
        await drain(agent, confirm(ask, shown))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert len(h.table) == 0


# before: a rejected resume at a busy moment stopped the run (fleet.resume_run ran before AgentScope
# rejected the event), and the later valid resume ended concurrency_limited
@pytest.mark.parametrize("busy", [False, True], ids=["free", "busy-at-the-rejected-resume"])
async def test_a_rejected_resume_at_a_busy_moment_does_not_stop_the_later_resume(busy: bool) -> None:
    import asyncio

    from agentscope_harness import ConcurrencyLimit
    from agentscope_harness.fleet import _lease_key
    from agentscope_harness.stores import MemoryStore

    ran = Ran()
    store = MemoryStore()
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=0.2)
    h = Harness(HarnessConfig(concurrency_limits=[limit], store=store), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("Refunded o-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares())
    ask = await _parked(h, agent)
    shown = ask.tool_calls[0]
    key = _lease_key(limit, h.table.get(agent.state.reply_id))
    await asyncio.sleep(0.3)  # the parked run's lease lapsed (a parked run is not in flight)
    other = await store.lease_acquire(key, 1, 30) if busy else None  # Alice's other session runs
    with h.acting_for(ALICE), pytest.raises(ValueError):
        await drain(agent, confirm(ask, shown.model_copy(update={"id": "call_typo"})))
    if other is not None:
        await store.lease_release(key, other)  # ... and ends: the slot is free again
    with h.acting_for(ALICE):
        await drain(agent, confirm(ask, shown))
    report = h.last_report(agent)
    assert ran.of("refund") == [{"order_id": "o-1"}], (ran, report.reason)
    assert report.terminal_state is TerminalState.COMPLETED, report.reason


def _allow_refund_rule() -> Any:
    from agentscope.permission import PermissionBehavior, PermissionRule

    return PermissionRule(tool_name="refund", rule_content=None, behavior=PermissionBehavior.ALLOW, source="session")


# before: AgentScope added the permission rule of Bob's refused confirmation to Alice's agent
@pytest.mark.parametrize("rules", [False, True], ids=["no-rules", "bobs-rules"])
async def test_another_callers_refused_confirmation_leaves_no_permission_rule(rules: bool) -> None:
    ran = Ran()
    h, agent = _asking_refund(ran, [calls(("refund", {"order_id": "o-1"})),
                                    calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")])
    ask = await _parked(h, agent)
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=[_allow_refund_rule()] if rules else None)
    with h.acting_for(BOB):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))
    assert h.last_report(agent).reason == "refused:permission_denied"
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "and o-999?"))
    assert ran.of("refund") == [], ran
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)


def _verify_then_refund(ran: Ran, script: list[Any]) -> tuple[Harness, Any, ScriptedModel]:
    """``verify_code`` runs on the client; ``refund`` requires it."""
    from agentscope.tool import ToolBase

    class VerifyCode(ToolBase):
        name = "verify_code"
        description = "Check the one-time code on the user's device."
        input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
        is_concurrency_safe = False
        is_read_only = True
        is_external_tool = True
        metadata_schema = {"type": "object", "required": ["checked_at"]}

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
            from scripted import ALLOW
            return ALLOW

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation",
                                                         requires=[Prerequisite(tool="verify_code")])}),
                load_entry_points=False)
    model = ScriptedModel(script)
    toolkit = Toolkit(tools=[VerifyCode(), tool(refund), tool(searcher(ran))])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    return h, agent, model


def _client_result(call: Any, output: str, state: ToolResultState, metadata: dict | None = None) -> ToolResultBlock:
    return ToolResultBlock(id=call.id, name=call.name, output=output, state=state, metadata=metadata or {})


VERIFY_SCRIPT = [calls(("verify_code", {"code": "1234"})), calls(("search", {"q": "A-1"})),
                 calls(("refund", {"order_id": "A-1"})), text("Refunded A-1.")]


async def test_control_a_clients_failed_prerequisite_stops_the_refund() -> None:
    """Regression guard (control): the client's only answer is a failure:
    ``refund`` is refused (``prerequisite_missing``)."""
    ran = Ran()
    h, agent, model = _verify_then_refund(ran, list(VERIFY_SCRIPT))
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund A-1, my code is 1234"))
        call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        wrong = _client_result(call, "wrong code", ToolResultState.ERROR)
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[wrong]))
    assert ran.of("refund") == [], ran
    assert h.last_report(agent).refusals.get("prerequisite_missing") == 1


@pytest.mark.parametrize("rejected_by", ["metadata_schema", "unknown_id"])
async def test_a_clients_rejected_success_is_no_prerequisite(rejected_by: str) -> None:
    ran = Ran()
    h, agent, model = _verify_then_refund(ran, list(VERIFY_SCRIPT))
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund A-1, my code is 1234"))
        call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        ok = _client_result(call, "code accepted", ToolResultState.SUCCESS,
                            {} if rejected_by == "metadata_schema" else {"checked_at": "now"})
        sent = [ok] if rejected_by == "metadata_schema" else [ok, ok.model_copy(update={"id": "call_typo"})]
        with pytest.raises((ValueError, ValidationError)):  # AgentScope rejects it: the reply stays parked
            await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=sent))
        wrong = _client_result(call, "wrong code", ToolResultState.ERROR)
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[wrong]))
    assert ran.of("refund") == [], ran


def _finished_shop(ran: Ran) -> tuple[Harness, Any]:
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), text("Found a.")])
    return h, make_agent(model, h.instrument(Toolkit(tools=[tool(searcher(ran))])), h.middlewares())


async def test_a_no_op_interrupt_after_a_finished_run_publishes_no_report() -> None:
    from agentscope.event import UserInterruptEvent

    ran = Ran()
    h, agent = _finished_shop(ran)
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "a?"))
    first = h.last_report(agent)
    assert first.terminal_state is TerminalState.COMPLETED
    with h.acting_for(BOB):
        assert [e async for e in agent.reply_stream(UserInterruptEvent(reply_id=agent.state.reply_id))] == []
    assert len(h.reports) == 1 and h.last_report(agent) is first, h.last_report(agent).principal


async def test_a_rejected_result_after_a_finished_run_does_not_rewrite_its_report() -> None:
    ran = Ran()
    h, agent = _finished_shop(ran)
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "a?"))
        block = ToolResultBlock(id="call_x", name="search", output="o", state=ToolResultState.SUCCESS)
        with pytest.raises(ValueError):
            await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[block]))
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)
    assert len(h.table) == 0


# ====================================================== 2. model call charging (AgentScope's real OpenAIChatModel)


async def _usageless_server(text_out: str, stream: bool) -> tuple[Any, str, list[dict]]:
    """A chat-completions endpoint that never reports usage."""
    from aiohttp import web

    seen: list[dict] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        if not body.get("stream"):
            return web.json_response({"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-test",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": text_out}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(0, len(text_out), 8):
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test",
                     "choices": [{"index": 0, "delta": {"content": text_out[i:i + 8]}, "finish_reason": None}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        end = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1", seen


@pytest.mark.parametrize("stream", [False, True], ids=["no-stream", "stream"])
async def test_an_answer_without_usage_is_charged_within_max_tokens(stream: bool) -> None:
    """Regression guard: dense output (400 characters, within 20 real
    tokens) with no usage reported: charged at most ``max_tokens`` and never
    nothing; the run stays within ``cap_usd``."""
    from agentscope.agent import Agent, InjectionConfig, ReActConfig
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    from agentscope_harness import CostPolicy, ModelPrice

    runner, base_url, seen = await _usageless_server("=" * 400, stream)
    model = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=base_url),
                            model="gpt-test", stream=stream, max_retries=0,
                            client_kwargs={"max_retries": 0, "timeout": 5.0},
                            parameters=OpenAIChatModel.Parameters(max_tokens=20))
    try:
        h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.03, prices={"gpt-test": ModelPrice(1.0, 1000.0)})),
                    load_entry_points=False)
        agent = Agent(name="shop", system_prompt="You help.", model=model, toolkit=h.instrument(Toolkit()),
                      middlewares=h.middlewares(), react_config=ReActConfig(max_iters=3),
                      injection_config=InjectionConfig(inject_runtime_state=False))
        with h.acting_for(ALICE):
            await drain(agent, UserMsg("user", "a mug?"))
        report = h.last_report(agent)
        assert len(seen) == 1 and seen[0]["max_completion_tokens"] == 20
        assert 0 < report.output_tokens <= 20, report.output_tokens
        assert report.input_tokens > 0 and report.spent_usd <= 0.03, report.spent_usd
    finally:
        await model.client.close()
        await runner.cleanup()


# ====================================================== 3. stops, ends and what the user receives

STOP_TEXT = "Stopped by the house policy."


def _pre_think_stopper(state: TerminalState) -> Any:
    from agentscope_harness import HookContext, harness_hook

    seen: list[int] = []

    @harness_hook("pre_think", name="house_stop", priority=50)
    def house_stop(ctx: HookContext) -> None:
        seen.append(1)
        if len(seen) == 2:  # the round after the ask tool asked
            ctx.stop("hook_said", state, text=STOP_TEXT)

    return house_stop


@pytest.mark.parametrize("state", [TerminalState.INCOMPLETE, TerminalState.FAILED], ids=lambda s: s.value)
async def test_a_stop_after_the_ask_tool_asked_agrees_with_the_report(state: TerminalState) -> None:
    from hookkit import drive, harnessed, shop_tools

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools={"ask_user": ToolPolicy(role="ask")}),
                                [calls(("ask_user", {"question": "Which colour?"})), text("Which colour, red or blue?")],
                                [t["ask_user"]], hooks=[_pre_think_stopper(state)])
    _, final, report = await drive(h, agent, ALICE)
    said = final.get_text_content() or ""
    assert (report.terminal_state is TerminalState.WAITING_INPUT) == (STOP_TEXT not in said), (said, report.reason)


async def test_control_the_ask_tool_question_is_relayed_without_a_stop() -> None:
    """Regression guard (control of the attack above): no hook's stop, the
    model relays the question and the run waits for the user."""
    from hookkit import drive, harnessed, shop_tools

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools={"ask_user": ToolPolicy(role="ask")}),
                                [calls(("ask_user", {"question": "Which colour?"})), text("Which colour, red or blue?")],
                                [t["ask_user"]])
    _, final, report = await drive(h, agent, ALICE)
    assert final.get_text_content() == "Which colour, red or blue?"
    assert report.terminal_state is TerminalState.WAITING_INPUT


async def test_an_early_pre_think_stop_after_delivery_keeps_the_delivered_answer() -> None:
    from hookkit import drive, harnessed, shop_tools

    from agentscope_harness import HookContext, harness_hook

    @harness_hook("pre_think", name="early_stop", priority=1)
    def early_stop(ctx: HookContext) -> None:
        if ctx.run.facts.terminal is not None:
            ctx.stop("hook_said", TerminalState.INCOMPLETE, text=STOP_TEXT)

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}),
                                [calls(("submit", {"answer": "The red mug."})), text("never")],
                                [t["submit"]], hooks=[early_stop])
    _, final, report = await drive(h, agent, ALICE)
    said = final.get_text_content() or ""
    assert (report.terminal_state is TerminalState.COMPLETED) == (said == "The red mug."), (said, report.reason)

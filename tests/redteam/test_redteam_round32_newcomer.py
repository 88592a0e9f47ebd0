"""Round 32, a newcomer's pass over the README's mainstream promises.

What was tried, end to end, as a team adopting the library would: a
customer-support agent (``lookup_order`` / ``refund_order`` /
``cancel_order`` and a finishing ``submit_answer``) built exactly as the
README's "Use it" block builds it (``harness.instrument(toolkit)``,
``harness.middlewares()``, ``harness.acting_for``, ``harness.last_report``),
driven by AgentScope's real ``OpenAIChatModel`` against the scripted
OpenAI-compatible SSE server (split tool-call argument deltas, a trailing
usage chunk) and by the scripted model of ``agentscope_harness.testing``.

Covered: the "Use it" code as printed; ``identity_args`` and
``requires=[Prerequisite(...)]``; ``ask_when`` parking, a confirmed resume
by the parker and a resume by another caller; a remembered approval;
``CostPolicy`` prices, ``cap_usd`` with a ``lite`` tier model and the status
line, ``daily_quota_usd`` across runs and with no principal bound, an
unpriced model on a capped budget, ``on_exhausted="ask"`` +
``harness.extend``; ``deadline_s`` on a slow provider; ``max_model_calls``
with and without the finishing tool; ``secret_values`` and ``pii``
(``redact``/``mask``/``hash``/``block``) in what the model read, the stream
and the final message; ``claims``; ``disclose_budget="every_call"``;
``on_report`` (async, and one that raises); ``HARNESS_ENABLED=0``,
``HARNESS_MODE=shadow``, ``HARNESS_DISABLED_HOOKS``; and the CLI's
``check-config`` (secret values as placeholders, env overrides, a bad field
named).

Every mainstream promise tried held in this round, so the tests below are
regression guards of those flows (each asserts what the README says and
fails if it stops holding); no ``xfail`` is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.credential import OpenAICredential
from agentscope.event import (
    ConfirmResult,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from pydantic import SecretStr
from server import FakeOpenAI, Reply

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    HarnessConfigError,
    Prerequisite,
    Principal,
    RunReport,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness.testing import ScriptedModel, calls, text

ROOT = Path(__file__).resolve().parents[2]
U42 = Principal(user_id="u-42", tenant="acme")
U77 = Principal(user_id="u-77", tenant="acme")
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
SECRET = "acme-internal-token-778899"
EMAIL = "jane.doe@example.com"
REFUND_ASK = "refunds over $50 need a human"


# ------------------------------------------------------------ the real model


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    """AgentScope's real ``OpenAIChatModel`` on the scripted server, no
    retries at either layer (as ``tests/realclient/conftest.py`` builds it);
    its clients are closed while the loop still runs."""
    made: list[OpenAIChatModel] = []

    def make(server: FakeOpenAI, model: str = "gpt-test", **kw: Any) -> OpenAIChatModel:
        made.append(OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
            model=model, stream=True, max_retries=0, retry_delay=0.01,
            client_kwargs={"max_retries": 0, "timeout": 30.0}, **kw))
        return made[-1]

    yield make
    for model in made:
        await model.client.close()


# ------------------------------------------------------------ the support desk


def desk(ran: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The support agent's tools, recording what really ran."""

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.append(("lookup", order_id, user_id))
        return f"order {order_id} of {user_id}: paid 80 USD, contact {EMAIL}"

    async def refund_order(order_id: str, user_id: str, amount: float) -> str:
        """Refund an order. Args: order_id (str): The order. user_id (str): Its owner. amount (float): USD."""
        ran.append(("refund", order_id, user_id, amount))
        return f"refunded {amount} on {order_id}"

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.append(("cancel", order_id, user_id))
        return f"order {order_id} cancelled"

    async def submit_answer(answer: str) -> str:
        """Give the final answer. Args: answer (str): The answer for the user."""
        ran.append(("finish", answer))
        return "submitted"

    return {f.__name__: f for f in (lookup_order, refund_order, cancel_order, submit_answer)}


def over_50(args: dict[str, Any]) -> str | None:
    return REFUND_ASK if args["amount"] > 50 else None


def policies(**extra: ToolPolicy) -> dict[str, ToolPolicy]:
    own = {"user_id": "user_id"}
    needs_lookup = [Prerequisite(tool="lookup_order", same_args=["order_id"])]
    return {
        "lookup_order": ToolPolicy(role="lookup", identity_args=own),
        "refund_order": ToolPolicy(role="mutation", identity_args=own, requires=needs_lookup, ask_when=over_50),
        "cancel_order": ToolPolicy(role="mutation", identity_args=own, requires=needs_lookup),
        **extra,
    }


def build(config: HarnessConfig, model: Any, ran: list[tuple[Any, ...]],
          names: tuple[str, ...] = ("lookup_order", "refund_order", "cancel_order")) -> tuple[Harness, Agent]:
    """The README's construction, with only the model and tools swapped."""
    fns = desk(ran)
    harness = Harness(config, load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(fns[n], permission=ALLOW) for n in names]))
    agent = Agent(name="support", system_prompt="You help with orders.", model=model, toolkit=toolkit,
                  middlewares=harness.middlewares(),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    return harness, agent


async def reply(harness: Harness, agent: Agent, inputs: Any = "help me",
                principal: Principal | None = U42) -> tuple[list[Any], Msg]:
    events: list[Any] = []
    final: Msg | None = None
    src = UserMsg("user", inputs) if isinstance(inputs, str) else inputs

    async def go() -> None:
        nonlocal final
        async for item in agent.reply_stream(src, yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)

    if principal is None:
        await go()
    else:
        with harness.acting_for(principal):
            await go()
    assert final is not None
    return events, final


def streamed(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def read_by_model(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] == "tool":
            c = m["content"]
            out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


def status_lines(body: dict[str, Any]) -> list[str]:
    return [t for t in (json.dumps(m.get("content"), ensure_ascii=False) for m in body["messages"]
                        if m["role"] == "user") if "[harness:budget]" in t]


def confirm(ask: RequireUserConfirmEvent, ok: bool = True) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
        ConfirmResult(confirmed=ok, tool_call=c) for c in ask.tool_calls])


def priced(**kw: Any) -> CostPolicy:
    return CostPolicy(prices={"gpt-test": (1.0, 10.0), "gpt-lite": (0.1, 1.0)}, **kw)


# ------------------------------------------------------------ "Use it", verbatim


def test_readme_use_it_block_prints_what_the_readme_says() -> None:
    """README "Use it": the block, extracted from the README and run as a
    script, prints the line the README quotes."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Use it", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("Cancelled A-1. | completed {'lookup_order': 1, 'cancel_order': 1} "
                                  "{'permission_denied': 1}")


async def test_use_it_script_on_the_scripted_model_refuses_the_foreign_cancel() -> None:
    """The same flow in-process on ``ScriptedModel``: what the model read."""
    ran: list[tuple[Any, ...]] = []
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-9", "user_id": "u-77"})),
                           calls(("lookup_order", {"order_id": "A-1", "user_id": "u-42"})),
                           calls(("cancel_order", {"order_id": "A-1", "user_id": "u-42"})), text("Cancelled A-1.")])
    harness, agent = build(HarnessConfig(tools=policies(), deadline_s=120), model, ran)
    _, msg = await reply(harness, agent, "cancel my last order")
    assert ran == [("lookup", "A-1", "u-42"), ("cancel", "A-1", "u-42")]
    told = [m["content"] for m in model.calls[1]["formatted"] if m["role"] == "tool"]
    assert "[harness:permission_denied]" in json.dumps(told) and "'u-42'" in json.dumps(told)
    assert msg.get_text_content() == "Cancelled A-1."


# ------------------------------------------------------------ support flow, real client


async def test_refund_asks_a_human_then_the_finishing_tool_ends_the_run(server: FakeOpenAI, make_model: Any) -> None:
    """``ask_when`` parks the refund (``waiting_input`` with its reason, the
    tool not run); the parker's confirmation runs it; ``submit_answer`` ends
    the run at once (no extra model round); ``HarnessConfig.pii`` and
    ``secret_values`` hold in what the model read, the stream and the final
    message; ``disclose_budget="every_call"`` tells the model its budget;
    ``on_report`` (async) gets the provisional and the final report."""
    ran: list[tuple[Any, ...]] = []
    got: list[RunReport] = []

    async def on_report(r: RunReport) -> None:
        got.append(r)

    cfg = HarnessConfig(
        tools=policies(submit_answer=ToolPolicy(role="finish")),
        cost=priced(cap_usd=0.05, daily_quota_usd=1.0), deadline_s=30, max_model_calls=8,
        secret_values=[SECRET], pii={"email": "redact"}, disclose_budget="every_call", on_report=on_report)
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=200))
    harness, agent = build(cfg, model, ran, ("lookup_order", "refund_order", "cancel_order", "submit_answer"))
    server.plan(
        Reply(text="Let me check. ", tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]),
        Reply(tool_calls=[("refund_order", {"order_id": "A-1", "user_id": "u-42", "amount": 80})]),
        Reply(tool_calls=[("submit_answer", {"answer": f"Refunded 80 USD on A-1; receipt to {EMAIL}, ref {SECRET}"})]),
        Reply(text="an extra round the harness promises not to make"),
    )
    events, msg = await reply(harness, agent, "refund A-1")
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    parked = harness.last_report(agent)
    assert parked is not None and parked.terminal_state == TerminalState.WAITING_INPUT
    assert parked.reason == REFUND_ASK and ran == [("lookup", "A-1", "u-42")]
    assert any("[harness:budget]" in s and "8 model calls left" in s for s in status_lines(server.requests[0]))

    events, msg = await reply(harness, agent, confirm(ask))
    report = harness.last_report(agent)
    assert ran[1] == ("refund", "A-1", "u-42", 80)
    assert ran[2][0] == "finish" and SECRET not in ran[2][1]  # the finishing tool receives it redacted
    assert len(server.requests) == 3 and server.runaway == 0 and len(server.script) == 1
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished")
    assert report.tool_calls == {"lookup_order": 1, "refund_order": 1, "submit_answer": 1}
    assert report.model_calls == 3 and report.spent_usd == pytest.approx(0.0006)
    final = msg.get_text_content() or ""
    assert final.startswith("Refunded 80 USD on A-1") and EMAIL not in final and SECRET not in final
    assert streamed(events).endswith(final)
    blob = json.dumps([e.model_dump() for e in events], default=str)
    assert EMAIL not in blob and SECRET not in blob
    assert EMAIL not in report.to_json()
    assert [(r.terminal_state, r.reason) for r in got] == [
        (TerminalState.WAITING_INPUT, REFUND_ASK), (TerminalState.COMPLETED, "finished")]


async def test_a_confirmation_sent_by_another_caller_runs_nothing(server: FakeOpenAI, make_model: Any) -> None:
    """"runs only if ... the principal bound at resume is the one who parked
    it": another user's confirmation ends the run with the fallback."""
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools={"refund_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                                          ask_when=over_50)})
    harness, agent = build(cfg, make_model(server), ran, ("refund_order",))
    server.plan(Reply(tool_calls=[("refund_order", {"order_id": "A-1", "user_id": "u-42", "amount": 80})]),
                Reply(text="Refunded."))
    events, _ = await reply(harness, agent, "refund A-1")
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    _, msg = await reply(harness, agent, confirm(ask), principal=U77)
    report = harness.last_report(agent)
    assert ran == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:permission_denied")
    assert (msg.get_text_content() or "").startswith("I could not complete this request")


async def test_a_remembered_approval_skips_the_question(server: FakeOpenAI, make_model: Any) -> None:
    """``harness.approve(principal, session_id, tool, when=...)``."""
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools={"refund_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                                          ask_when=over_50)})
    harness, agent = build(cfg, make_model(server), ran, ("refund_order",))
    harness.approve(U42, agent.state.session_id, "refund_order", when=lambda a: a["amount"] < 100, ttl_s=600)
    server.plan(Reply(tool_calls=[("refund_order", {"order_id": "A-1", "user_id": "u-42", "amount": 80})]),
                Reply(text="Refunded."))
    events, _ = await reply(harness, agent, "refund A-1")
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert ran == [("refund", "A-1", "u-42", 80)]


async def test_claims_correct_an_answer_whose_action_was_refused(server: FakeOpenAI, make_model: Any) -> None:
    """"an answer claiming an action that never succeeded is corrected"
    (with ``claims`` on the tool): the correction follows in the stream."""
    ran: list[tuple[Any, ...]] = []
    tools = policies()
    tools["cancel_order"] = tools["cancel_order"].model_copy(update={"claims": [r"\bcancell?ed\b"]})
    harness, agent = build(HarnessConfig(tools=tools), make_model(server), ran)
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]),
                Reply(text="Cancelled A-9 for you."))
    events, msg = await reply(harness, agent, "cancel A-9")
    report = harness.last_report(agent)
    assert ran == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")
    assert report.unsupported_claims == ["cancel_order"]
    assert "did not succeed" in (msg.get_text_content() or "")
    assert streamed(events).endswith(msg.get_text_content() or "")


# ------------------------------------------------------------ money


async def test_cap_moves_to_the_lite_tier_and_tells_the_model(server: FakeOpenAI, make_model: Any) -> None:
    """``cap_usd`` + ``tier_models``: at <= 0.5 left the request goes to the
    lite model, priced at its own price, with "now on the lite model"."""
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools=policies(), cost=priced(cap_usd=0.01, tier_models={"lite": make_model(server, model="gpt-lite")}))
    harness, agent = build(cfg, make_model(server), ran)
    server.plan(*[Reply(tool_calls=[("lookup_order", {"order_id": f"A-{i}", "user_id": "u-42"})], usage=(1000, 100))
                  for i in range(3)], Reply(text="All paid.", usage=(1000, 100)))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert [b["model"] for b in server.requests] == ["gpt-test"] * 3 + ["gpt-lite"]
    assert any("now on the lite model" in s for s in status_lines(server.requests[3]))
    assert report.spent_usd == pytest.approx(3 * 0.002 + 0.0002)
    assert report.terminal_state == TerminalState.COMPLETED and msg.get_text_content() == "All paid."


async def test_daily_quota_binds_across_runs_and_needs_a_principal(server: FakeOpenAI, make_model: Any) -> None:
    """``daily_quota_usd``: reserved before each call, spend never past the
    quota; a run with no principal bound makes no model call."""
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools=policies(), cost=priced(daily_quota_usd=0.005))
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=100))
    harness, agent = build(cfg, model, ran)
    spent = 0.0
    for k in range(3):
        server.script.clear()
        server.plan(Reply(tool_calls=[("lookup_order", {"order_id": f"A-{k}", "user_id": "u-42"})], usage=(100, 100)),
                    Reply(text=f"Done {k}.", usage=(100, 100)))
        await reply(harness, agent)
        spent += harness.last_report(agent).spent_usd
    assert spent <= 0.005 + 1e-9
    assert harness.last_report(agent).reason == "budget"
    before = len(server.requests)
    _, msg = await reply(harness, agent, principal=None)
    assert len(server.requests) == before
    assert harness.last_report(agent).reason == "budget"
    assert "budget" in (msg.get_text_content() or "")


async def test_an_unpriced_model_on_a_capped_budget_is_never_called(server: FakeOpenAI, make_model: Any) -> None:
    ran: list[tuple[Any, ...]] = []
    harness, agent = build(HarnessConfig(cost=priced(cap_usd=1.0)), make_model(server, model="gpt-unknown"), ran)
    server.plan(Reply(text="hello"))
    await reply(harness, agent)
    report = harness.last_report(agent)
    assert server.requests == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unpriced_model")


async def test_budget_question_then_extend_continues(server: FakeOpenAI, make_model: Any) -> None:
    """``CostPolicy(on_exhausted="ask")`` + ``harness.extend``."""
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools=policies(), cost=priced(cap_usd=0.005, on_exhausted="ask"))
    harness, agent = build(cfg, make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=100)), ran)
    server.plan(*[Reply(tool_calls=[("lookup_order", {"order_id": f"A-{i}", "user_id": "u-42"})], usage=(1000, 100))
                  for i in range(3)], Reply(text="All three are paid.", usage=(1000, 100)))
    _, msg = await reply(harness, agent)
    assert harness.last_report(agent).terminal_state == TerminalState.WAITING_INPUT
    assert "Shall I continue?" in (msg.get_text_content() or "")
    with harness.acting_for(U42):
        harness.extend(agent, usd=0.01)
    _, msg = await reply(harness, agent, "yes, go on")
    report = harness.last_report(agent)
    assert msg.get_text_content() == "All three are paid."
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.extensions == [{"what": "usd", "by": 0.01, "approved_by": "u-42"}]
    assert len(ran) == 3


# ------------------------------------------------------------ stopping


async def test_a_finish_at_max_model_calls_is_delivered_and_a_run_past_it_hands_over(
    server: FakeOpenAI, make_model: Any,
) -> None:
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools=policies(submit_answer=ToolPolicy(role="finish")), max_model_calls=3)
    names = ("lookup_order", "submit_answer")
    harness, agent = build(cfg, make_model(server), ran, names)
    server.plan(Reply(tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]),
                Reply(tool_calls=[("lookup_order", {"order_id": "A-2", "user_id": "u-42"})]),
                Reply(tool_calls=[("submit_answer", {"answer": "A-1 and A-2 are paid."})]))
    _, msg = await reply(harness, agent)
    assert msg.get_text_content() == "A-1 and A-2 are paid."
    assert harness.last_report(agent).reason == "finished" and len(server.requests) == 3

    harness, agent = build(cfg, make_model(server), ran, names)
    server.plan(*[Reply(tool_calls=[("lookup_order", {"order_id": f"B-{i}", "user_id": "u-42"})]) for i in range(6)])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert len(server.requests) == 6 and report.model_calls == 3
    final = msg.get_text_content() or ""
    assert "What I found before stopping" in final and "order B-2 of u-42" in final
    assert streamed(events) == final


async def test_deadline_cuts_a_slow_provider_and_hands_over_what_was_found(
    server: FakeOpenAI, make_model: Any,
) -> None:
    ran: list[tuple[Any, ...]] = []
    harness, agent = build(HarnessConfig(tools=policies(), deadline_s=1.0), make_model(server), ran)
    server.plan(Reply(tool_calls=[("lookup_order", {"order_id": "C-1", "user_id": "u-42"})]),
                Reply(text="too late", delay_s=5))
    start = time.monotonic()
    _, msg = await reply(harness, agent)
    assert time.monotonic() - start < 2.0
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "order C-1 of u-42" in (msg.get_text_content() or "")


# ------------------------------------------------------------ pii modes


async def test_pii_hash_is_stable_within_a_run_and_block_withholds(server: FakeOpenAI, make_model: Any) -> None:
    ran: list[tuple[Any, ...]] = []
    cfg = HarnessConfig(tools={**policies(), "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"},
                                                                       pii={"email": "hash"})}, pii={"email": "hash"})
    harness, agent = build(cfg, make_model(server), ran)
    server.plan(Reply(tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]),
                Reply(text=f"Mail {EMAIL}"))
    _, msg = await reply(harness, agent)
    (seen,) = read_by_model(server.requests[-1])
    tag = (msg.get_text_content() or "").removeprefix("Mail ")
    assert tag.startswith("[pii:email:") and tag in seen and EMAIL not in seen

    server.script.clear()
    blocked = {**policies(), "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"},
                                                         pii={"email": "block"})}
    harness, agent = build(HarnessConfig(tools=blocked), make_model(server), ran)
    server.plan(Reply(tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]), Reply(text="Sorry."))
    events, _ = await reply(harness, agent)
    assert read_by_model(server.requests[-1])[0].startswith("[harness:pii_blocked]")
    assert harness.last_report(agent).refusals == {"pii_blocked": 1}
    assert EMAIL not in json.dumps([e.model_dump() for e in events], default=str)


# ------------------------------------------------------------ env flags


@pytest.mark.parametrize("env", ["shadow", "disabled", "no_auth", "bogus"])
async def test_env_flags(server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    """``HARNESS_MODE=shadow`` refuses nothing and records; ``HARNESS_ENABLED=0``
    gives no middleware; ``HARNESS_DISABLED_HOOKS`` drops a hook, an unknown
    name is an error naming it."""
    flags = {"shadow": ("HARNESS_MODE", "shadow"), "disabled": ("HARNESS_ENABLED", "0"),
             "no_auth": ("HARNESS_DISABLED_HOOKS", "authorization_gate"),
             "bogus": ("HARNESS_DISABLED_HOOKS", "authorization_gate,bogus_hook")}
    monkeypatch.setenv(*flags[env])
    ran: list[tuple[Any, ...]] = []
    if env == "bogus":
        with pytest.raises(HarnessConfigError, match="bogus_hook"):
            build(HarnessConfig(tools=policies()), make_model(server), ran)
        return
    harness, agent = build(HarnessConfig(tools=policies()), make_model(server), ran)
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]), Reply(text="ok"))
    await reply(harness, agent, "cancel A-9")
    report = harness.last_report(agent)
    if env == "disabled":
        assert harness.middlewares() == [] and report is None and ran == [("cancel", "A-9", "u-77")]
    elif env == "shadow":
        assert ran == [("cancel", "A-9", "u-77")] and report.mode == "shadow"
        refused = {(d.code, d.enforced) for d in report.decisions if d.action == "refuse"}
        assert refused == {("permission_denied", False), ("prerequisite_missing", False)}
    else:
        assert ran == [] and report.refusals == {"prerequisite_missing": 1}


# ------------------------------------------------------------ CLI


def test_check_config_hides_secret_values_and_lists_env_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """``agentscope-harness check-config`` (the console script's ``main``):
    secret values as placeholders, env overrides listed, a bad field named."""
    from agentscope_harness.cli import main

    policy = tmp_path / "policy.py"
    policy.write_text(
        "from agentscope_harness import HarnessConfig, ToolPolicy\n"
        f"config = HarnessConfig(tools={{'refund': ToolPolicy(role='mutation')}}, secret_values=[{SECRET!r}])\n",
        encoding="utf-8")
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    monkeypatch.setenv("HARNESS_DISABLED_HOOKS", "drift_detector")
    assert main(["check-config", str(policy)]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and "<secret>" in out
    assert "HARNESS_MODE=shadow" in out and "disables drift_detector" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tools": {"x": {"role": "finsh"}}}), encoding="utf-8")
    assert main(["check-config", str(bad)]) != 0
    assert "tools.x.role" in "".join(capsys.readouterr())

"""Red team, round 23: a newcomer's mainstream scenarios on the real client path.

AgentScope's real ``OpenAIChatModel`` (real ``openai`` client, real HTTP)
against the scripted OpenAI-compatible server of ``tests/realclient/server.py``
on 127.0.0.1, a real ``agentscope.agent.Agent`` and real tools in a real
``Toolkit``, built as the README's "Use it" block builds them. Budgets, call
caps, deadlines with a slow server, retries on 429/500, what the user's final
message says when a run stops, the ``RunReport``, the env flags, shadow mode,
sub-agents, structured output, streaming consumers that stop early.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
import server as scripted_server
from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel, SecretStr
from server import FakeOpenAI, Reply, fail

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    ModelPrice,
    Principal,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness.errors import HarnessConfigError

U42 = Principal(user_id="u-42", tenant="acme")
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
FALLBACK_START = "I could not complete this request"
PRICE = {"gpt-test": ModelPrice(input_per_mtok=1.0, output_per_mtok=10.0)}


# ------------------------------------------------------------------ fixtures


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    made: list[OpenAIChatModel] = []

    def make(srv: FakeOpenAI, stream: bool = True, model: str = "gpt-test", max_retries: int = 0,
             client_max_retries: int = 0, timeout_s: float = 30.0, **kw: Any) -> OpenAIChatModel:
        kw.setdefault("retry_delay", 0.01)
        m = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=srv.base_url),
            model=model, stream=stream, max_retries=max_retries,
            client_kwargs={"max_retries": client_max_retries, "timeout": timeout_s}, **kw,
        )
        made.append(m)
        return m

    yield make
    for m in made:
        await m.client.close()


# ------------------------------------------------------------------ helpers


class Ran:
    """What the real tools really ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def of(self, name: str) -> list[dict[str, Any]]:
        return [a for n, a in self.calls if n == name]


def shop_tools(ran: Ran) -> list[Any]:
    async def search(q: str) -> str:
        """Search the catalogue. Args: q (str): The query."""
        ran.calls.append(("search", {"q": q}))
        return f"result for {q}: item {q.replace(' ', '-')} costs {len(q)} EUR"

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.calls.append(("lookup_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} of {user_id}: paid"

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.calls.append(("cancel_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} cancelled"

    return [search, lookup_order, cancel_order]


SHOP = {
    "search": ToolPolicy(role="retrieval"),
    "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
    "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}),
}


def build(config: HarnessConfig | None, model: Any, fns: list[Any], name: str = "shop",
          harness: Harness | None = None, **agent_kw: Any) -> tuple[Harness, Agent]:
    """The README's construction (``instrument``, ``middlewares()``)."""
    harness = harness or Harness(config, load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in fns]))
    agent_kw.setdefault("react_config", ReActConfig(max_iters=20))
    agent = Agent(name=name, system_prompt="You help with orders.", model=model, toolkit=toolkit,
                  middlewares=harness.middlewares(),
                  injection_config=InjectionConfig(inject_runtime_state=False), **agent_kw)
    return harness, agent


async def reply(harness: Harness, agent: Agent, principal: Principal | None = U42,
                prompt: str = "find me a mug", **kw: Any) -> tuple[list[Any], Msg]:
    events: list[Any] = []
    final: Msg | None = None
    with harness.acting_for(principal):
        async for item in agent.reply_stream(UserMsg("user", prompt), yield_final_msg=True, **kw):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)
    assert final is not None
    return events, final


def streamed(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def said_to_model(body: dict[str, Any]) -> str:
    """Everything the provider was sent in one request's messages."""
    out = []
    for m in body["messages"]:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [p.get("text", "") for p in c if isinstance(p, dict)]
    return "\n".join(out)


def tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] != "tool":
            continue
        c = m["content"]
        out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


def searches(n: int, usage: tuple[int, int] = (100, 10)) -> list[Reply]:
    return [Reply(tool_calls=[("search", {"q": f"query {i}"})], usage=usage) for i in range(n)]


# ====================================================== 1. call caps


async def test_max_model_calls_ends_at_the_cap_with_what_was_found(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``max_model_calls`` reached means the fallback answer (plus
    what the run found) without a model call; ``incomplete``
    (``max_model_calls``)."""
    ran = Ran()
    server.plan(*searches(10))
    harness, agent = build(HarnessConfig(tools=SHOP, max_model_calls=3), make_model(server), shop_tools(ran))
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 3 and report.model_calls == 3
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "result for query 2" in text
    assert streamed(events).endswith(text)


async def test_a_retry_past_max_model_calls_is_not_made(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``model_calls`` counts attempts (AgentScope's retries each
    come back through ``on_model_call``) and ``max_model_calls`` is checked
    where a call is counted: a 429 on the cap's last call is not retried
    past it."""
    ran = Ran()
    server.plan(*searches(1), fail(429, 3), Reply(text="A red mug."))
    harness, agent = build(HarnessConfig(tools=SHOP, max_model_calls=2), make_model(server, max_retries=3),
                           shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert server.statuses == [200, 429]
    assert report.model_calls == 2
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert (msg.get_text_content() or "").startswith(FALLBACK_START)


async def test_max_tool_calls_admits_exactly_the_cap_in_one_parallel_batch(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: per-run caps with exact admission under parallel calls."""
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": f"mug {i}"}) for i in range(4)]), Reply(text="Mug 0 it is."))
    harness, agent = build(HarnessConfig(tools=SHOP, max_tool_calls=2), make_model(server), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(ran.of("search")) == 2
    assert report.tool_calls == {"search": 2} and report.refusals == {"quota_exhausted": 2}
    told = tool_results(server.requests[1])
    assert sum(t.startswith("[harness:quota_exhausted]") for t in told) == 2
    assert msg.get_text_content() == "Mug 0 it is."


# ====================================================== 2. USD and token caps


async def test_max_output_tokens_is_not_passed_with_real_usage(server: FakeOpenAI, make_model: Any) -> None:
    """README "What a cap guarantees": a call that would take the tokens past
    ``max_output_tokens`` is not made; ``incomplete`` (``budget``)."""
    ran = Ran()
    server.plan(*searches(10, usage=(50, 40)))
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=40))
    harness, agent = build(HarnessConfig(tools=SHOP, cost=CostPolicy(max_output_tokens=130, prices=PRICE)),
                           model, shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert report.output_tokens <= 130
    assert len(server.requests) == 3
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "result for query 2" in (msg.get_text_content() or "")


async def test_cached_input_tokens_are_charged_at_the_cached_price(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README: ``prices`` accept ``(in, out, cached_in)`` tuples (USD per M
    tokens); ``ModelPrice.cached_input_per_mtok`` is the "price of input
    tokens served from the provider's prompt cache". AgentScope's
    ``OpenAIChatModel`` reports ``prompt_tokens_details.cached_tokens`` as
    ``ChatUsage.cache_input_tokens``."""
    usage = scripted_server._usage

    def cached(u: tuple[int, int]) -> dict[str, Any]:
        return {**usage(u), "prompt_tokens_details": {"cached_tokens": 900}}

    monkeypatch.setattr(scripted_server, "_usage", cached)
    server.plan(Reply(text="A red mug.", usage=(1000, 10)))
    cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": (10.0, 10.0, 1.0)})
    harness, agent = build(HarnessConfig(cost=cost), make_model(server), [])
    await reply(harness, agent)
    report = harness.last_report(agent)
    assert report.input_tokens == 1000
    # 100 uncached at $10/M + 900 cached at $1/M + 10 out at $10/M
    assert report.spent_usd == pytest.approx((100 * 10 + 900 * 1 + 10 * 10) / 1e6)


# ====================================================== 3. deadlines


async def test_a_slow_stream_is_cut_at_the_deadline_and_charged(server: FakeOpenAI, make_model: Any) -> None:
    """README: deadlines bound every model call; a call cut is charged its
    request and what streamed; ``incomplete`` (``deadline``), the fallback
    and what the run found follow in the stream."""
    ran = Ran()
    server.plan(*searches(1), Reply(text="The red mug is the best choice for you " * 10, chunk_delay_s=0.05))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1.5, cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server), shop_tools(ran))
    started = time.monotonic()
    events, msg = await reply(harness, agent)
    took = time.monotonic() - started
    report = harness.last_report(agent)
    assert took < 2.2, took
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "result for query 0" in text
    assert streamed(events).endswith(text)
    assert report.model_calls == 2
    assert report.spent_usd > (100 * 1.0 + 10 * 10.0) / 1e6  # the first call and part of the second


async def test_a_non_streaming_slow_answer_is_cut_at_the_deadline(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    server.plan(*searches(1), Reply(text="late", delay_s=3))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1), make_model(server, stream=False),
                           shop_tools(ran))
    started = time.monotonic()
    _, msg = await reply(harness, agent)
    assert time.monotonic() - started < 1.7
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "result for query 0" in text and "late" not in text


async def test_500_retries_stop_at_the_deadline(server: FakeOpenAI, make_model: Any) -> None:
    """Retries of a failing provider are within the run's deadline: the
    reply ends by the deadline, ``incomplete`` (``deadline``), not
    ``failed`` after the retries run on."""
    ran = Ran()
    server.plan(*searches(1), fail(500, 10, delay_s=0.4))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1, model_error_text="Try later."),
                           make_model(server, max_retries=8, retry_delay=0.1), shop_tools(ran))
    started = time.monotonic()
    _, msg = await reply(harness, agent)
    assert time.monotonic() - started < 1.7
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert (msg.get_text_content() or "").startswith(FALLBACK_START)


# ====================================================== 4. env flags


async def test_env_harness_enabled_0_passes_everything_through(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_ENABLED", "0")
    ran = Ran()
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]), Reply(text="Done."))
    harness, agent = build(HarnessConfig(tools=SHOP), make_model(server), shop_tools(ran))
    assert harness.middlewares() == []
    _, msg = await reply(harness, agent)
    assert ran.of("cancel_order") == [{"order_id": "A-9", "user_id": "u-77"}]
    assert msg.get_text_content() == "Done."


async def test_env_shadow_mode_refuses_nothing_and_records(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    ran = Ran()
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]), Reply(text="Done."))
    harness, agent = build(HarnessConfig(tools=SHOP), make_model(server), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert ran.of("cancel_order") == [{"order_id": "A-9", "user_id": "u-77"}]
    assert msg.get_text_content() == "Done."
    refused = [d for d in report.decisions if d.action == "refuse"]
    assert [(d.code, d.enforced) for d in refused] == [("permission_denied", False)]
    assert "[harness:" not in "".join(tool_results(server.requests[1]))


async def test_env_deadline_disabled_lets_a_slow_answer_through(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_DEADLINE_ENABLED", "0")
    server.plan(Reply(text="A red mug.", delay_s=1.3))
    harness, agent = build(HarnessConfig(deadline_s=1), make_model(server), [])
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert msg.get_text_content() == "A red mug."
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")


def test_env_disabled_hooks_unknown_name_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_DISABLED_HOOKS", "spend_gate,no_such_hook")
    with pytest.raises(HarnessConfigError, match="no_such_hook"):
        Harness(HarnessConfig(), load_entry_points=False)


# ====================================================== 5. streaming consumers


async def test_a_consumer_that_stops_early_gets_a_cancelled_report_and_the_call_charged(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: a consumer that stops reading ``reply_stream`` ... the run is
    settled ``cancelled``; a call whose stream the caller dropped is charged
    its request and what streamed."""
    server.plan(Reply(text="The red mug is the best choice " * 20, chunk_delay_s=0.01))
    harness, agent = build(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices=PRICE)), make_model(server), [])
    with harness.acting_for(U42):
        stream = agent.reply_stream(UserMsg("user", "which mug?"))
        async for item in stream:
            if isinstance(item, TextBlockDeltaEvent) and item.delta.strip():
                break
        await stream.aclose()
    for _ in range(50):  # AgentScope's inner generator is closed by the loop's finalizer
        if harness.last_report(agent) is not None:
            break
        await asyncio.sleep(0.02)
    report = harness.last_report(agent)
    assert report is not None and report.terminal_state is TerminalState.CANCELLED
    assert report.model_calls == 1 and report.spent_usd > 0


# ====================================================== 6. reports


async def test_report_principal_and_on_report(server: FakeOpenAI, make_model: Any) -> None:
    got: list[Any] = []

    async def keep(r: Any) -> None:
        got.append(r)

    server.plan(Reply(text="A red mug.", usage=(120, 7)))
    harness, agent = build(HarnessConfig(on_report=keep, cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server), [])
    await reply(harness, agent)
    report = harness.last_report(agent)
    assert got == [report]
    assert report.principal and report.principal.get("user_id") == "u-42"
    assert (report.input_tokens, report.output_tokens) == (120, 7)
    assert report.spent_usd == pytest.approx((120 * 1 + 7 * 10) / 1e6)
    assert report.model_calls == 1 and report.agent == "shop"


# ====================================================== 7. sub-agents


def delegating(child: Agent) -> Callable[..., Any]:
    async def ask_specialist(task: str) -> str:
        """Ask the specialist. Args: task (str): What to research."""
        msg = await child.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    return ask_specialist


async def test_a_sub_agent_spends_the_leads_tool_calls_and_money(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``max_tool_calls`` / ``max_model_calls`` are run-wide,
    sub-agents included; a sub-agent's usage is charged to each enclosing
    run; its report is in the lead's ``children``."""
    ran = Ran()
    prices = {"lead-model": ModelPrice(1.0, 10.0), "sub-model": ModelPrice(2.0, 20.0)}
    harness = Harness(HarnessConfig(tools=SHOP, max_tool_calls=2, cost=CostPolicy(cap_usd=1.0, prices=prices)),
                      load_entry_points=False)
    _, child = build(None, make_model(server, model="sub-model"), shop_tools(ran), name="specialist",
                     harness=harness)
    _, lead = build(None, make_model(server, model="lead-model"), [delegating(child)], name="lead",
                    harness=harness)
    server.plan(
        Reply(tool_calls=[("ask_specialist", {"task": "best mug"})], usage=(100, 10)),     # lead
        Reply(tool_calls=[("search", {"q": "mug"})], usage=(200, 20)),                      # sub
        Reply(tool_calls=[("search", {"q": "cup"})], usage=(200, 20)),                      # sub: over the cap
        Reply(text="The red mug.", usage=(200, 20)),                                         # sub
        Reply(text="The specialist says: the red mug.", usage=(100, 10)),                   # lead
    )
    _, msg = await reply(harness, lead)
    report = harness.last_report(lead)
    assert [b["model"] for b in server.requests] == ["lead-model", "sub-model", "sub-model", "sub-model", "lead-model"]
    assert ran.of("search") == [{"q": "mug"}]
    assert "[harness:quota_exhausted]" in tool_results(server.requests[3])[-1]
    assert msg.get_text_content() == "The specialist says: the red mug."
    assert len(report.children) == 1
    child_report = report.children[0]
    assert child_report.model_calls == 3 and child_report.refusals == {"quota_exhausted": 1}
    assert child_report.spent_usd == pytest.approx(3 * (200 * 2 + 20 * 20) / 1e6)
    assert report.spent_usd == pytest.approx(2 * (100 + 100) / 1e6 + child_report.spent_usd)


async def test_a_sub_agent_stops_at_the_leads_max_model_calls(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    harness = Harness(HarnessConfig(tools=SHOP, max_model_calls=3), load_entry_points=False)
    _, child = build(None, make_model(server, model="sub-model"), shop_tools(ran), name="specialist",
                     harness=harness)
    _, lead = build(None, make_model(server, model="lead-model"), [delegating(child)], name="lead",
                    harness=harness)
    server.plan(Reply(tool_calls=[("ask_specialist", {"task": "best mug"})]), *searches(10))
    _, msg = await reply(harness, lead)
    report = harness.last_report(lead)
    assert len(server.requests) <= 3
    assert report.model_calls <= 3
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert (msg.get_text_content() or "").startswith(FALLBACK_START)


# ====================================================== 8. structured output forced to conclude


class Pick(BaseModel):
    product: str
    price_eur: int


async def test_structured_reply_stopped_by_the_usd_cap_never_passes_it(server: FakeOpenAI, make_model: Any) -> None:
    """README: "So ``spent_usd <= cap_usd`` ... whenever the estimates hold;
    guaranteed outright only with ``max_tokens`` set". A structured reply
    stopped by its budget: the narrowed rounds may not pass the cap."""
    ran = Ran()
    server.plan(*searches(6, usage=(50, 1000)),
                *[Reply(tool_calls=[("GenerateStructuredOutput", {"product": "mug", "price_eur": 3})],
                        usage=(50, 1000)) for _ in range(2)])
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(HarnessConfig(tools=SHOP, cost=CostPolicy(cap_usd=0.035, prices=PRICE)), model,
                           shop_tools(ran))
    _, msg = await reply(harness, agent, structured_schema=Pick)
    report = harness.last_report(agent)
    assert report.spent_usd <= 0.035
    assert len(server.requests) == 3
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert msg.structured_output is None
    text = msg.get_text_content() or ""
    assert "within its budget" in text and "result for query 2" in text


async def test_structured_reply_past_the_deadline_ends_with_the_fallback(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    server.plan(*searches(1), Reply(text="thinking...", delay_s=3),
                Reply(tool_calls=[("GenerateStructuredOutput", {"product": "mug", "price_eur": 3})]))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1), make_model(server), shop_tools(ran))
    started = time.monotonic()
    _, msg = await reply(harness, agent, structured_schema=Pick)
    assert time.monotonic() - started < 1.7
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert msg.structured_output is None
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "result for query 0" in text


# ====================================================== 9. the budget status line


async def test_every_call_status_line_tells_the_model_the_calls_left(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``disclose_budget="every_call"``: the model gets the status
    line (``6 model calls left``...) before every call. What it is told must
    be true: the calls left including the one it is reading it in."""
    ran = Ran()
    server.plan(*searches(3), Reply(text="Mug."))
    harness, agent = build(HarnessConfig(tools=SHOP, max_model_calls=6, max_tool_calls=5,
                                         disclose_budget="every_call"), make_model(server), shop_tools(ran))
    await reply(harness, agent)
    assert len(server.requests) == 4
    for i, body in enumerate(server.requests):
        said = said_to_model(body)
        lines = [ln for ln in said.splitlines() if "[harness:budget]" in ln]
        assert lines, said
        assert f"{6 - i} model calls left" in lines[-1], (i, lines[-1])
        assert f"{5 - i} tool calls left" in lines[-1], (i, lines[-1])


# ====================================================== 10. other stops


async def test_an_unpriced_model_on_a_capped_budget_is_never_called(server: FakeOpenAI, make_model: Any) -> None:
    harness, agent = build(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server, model="gpt-other"), [])
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert server.requests == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unpriced_model")
    assert (msg.get_text_content() or "").startswith(FALLBACK_START)


async def test_a_daily_quota_without_a_principal_makes_no_model_call(server: FakeOpenAI, make_model: Any) -> None:
    harness, agent = build(HarnessConfig(cost=CostPolicy(daily_quota_usd=1.0, prices=PRICE)), make_model(server), [])
    _, msg = await reply(harness, agent, principal=None)
    report = harness.last_report(agent)
    assert server.requests == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "within its budget" in (msg.get_text_content() or "")


async def test_max_request_input_tokens_refuses_a_large_request(server: FakeOpenAI, make_model: Any) -> None:
    """README: a request over ``max_request_input_tokens`` is not sent."""

    async def fetch(url: str) -> str:
        """Fetch a page. Args: url (str): The page."""
        return "lorem ipsum dolor " * 400

    server.plan(Reply(tool_calls=[("fetch", {"url": "http://x"})]), Reply(text="Summary."))
    harness, agent = build(HarnessConfig(cost=CostPolicy(max_request_input_tokens=800)), make_model(server), [fetch])
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 1
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert msg.get_text_content() != "Summary."


async def test_a_provider_failing_without_model_error_text_raises_and_reports_failed(
    server: FakeOpenAI, make_model: Any,
) -> None:
    server.plan(fail(500, 2))
    harness, agent = build(HarnessConfig(), make_model(server, max_retries=1), [])
    with pytest.raises(openai.InternalServerError):
        await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert report.model_calls == 2


async def test_wrap_up_equal_to_deadline_concludes_from_the_start(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``wrap_up_s`` equal to ``deadline_s`` means "conclude from the
    start": ``tool_choice`` narrowed (``none`` without a finishing tool)."""
    ran = Ran()
    server.plan(Reply(text="The red mug."))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=30, wrap_up_s=30), make_model(server),
                           shop_tools(ran))
    _, msg = await reply(harness, agent)
    assert server.requests[0].get("tool_choice") == "none"
    assert msg.get_text_content() == "The red mug."


# ====================================================== 11. more money


async def test_a_429_attempt_costs_nothing_and_the_retry_is_charged_once(server: FakeOpenAI, make_model: Any) -> None:
    server.plan(fail(429), Reply(text="A red mug.", usage=(300, 30)))
    harness, agent = build(HarnessConfig(cost=CostPolicy(cap_usd=1.0, daily_quota_usd=1.0, prices=PRICE)),
                           make_model(server, max_retries=2), [])
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert msg.get_text_content() == "A red mug."
    assert report.model_calls == 2
    assert report.spent_usd == pytest.approx((300 + 300) / 1e6)
    assert (report.input_tokens, report.output_tokens) == (300, 30)


async def test_the_daily_quota_holds_across_two_replies(server: FakeOpenAI, make_model: Any) -> None:
    """README: per-user daily quotas reserved before each model call."""
    ran = Ran()
    server.plan(*searches(10, usage=(50, 1000)))
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(HarnessConfig(tools=SHOP, cost=CostPolicy(daily_quota_usd=0.025, prices=PRICE)),
                           model, shop_tools(ran))
    await reply(harness, agent)
    first = harness.last_report(agent)
    _, msg = await reply(harness, agent, prompt="and a cup?")
    second = harness.last_report(agent)
    assert first.spent_usd + second.spent_usd <= 0.025
    assert len(server.requests) == 2
    assert (second.terminal_state, second.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "within its budget" in (msg.get_text_content() or "")


async def test_the_lite_tier_model_serves_and_is_priced_at_its_own_price(server: FakeOpenAI, make_model: Any) -> None:
    """README: cheaper model tiers: ≤ 0.5 of the budget left, the ``lite``
    model serves (and the status line says ``now on the lite model``)."""
    ran = Ran()
    params = OpenAIChatModel.Parameters(max_tokens=1000)
    lite = make_model(server, model="gpt-lite", parameters=params)
    prices = {"gpt-test": ModelPrice(1.0, 10.0), "gpt-lite": ModelPrice(0.1, 1.0)}
    server.plan(*searches(3, usage=(50, 1000)), Reply(text="Mug.", usage=(50, 1000)))
    harness, agent = build(
        HarnessConfig(tools=SHOP, cost=CostPolicy(cap_usd=0.04, prices=prices, tier_models={"lite": lite})),
        make_model(server, parameters=params), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert [b["model"] for b in server.requests] == ["gpt-test", "gpt-test", "gpt-lite", "gpt-lite"]
    assert report.spent_usd == pytest.approx(2 * 0.01005 + 2 * 0.001005)
    assert "now on the lite model" in said_to_model(server.requests[2])
    assert msg.get_text_content() == "Mug."
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")


async def test_a_stream_the_provider_breaks_gives_model_error_text_and_is_charged(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: a call "broken by the provider after it began, is charged its
    request and what streamed"; the provider failing for good: ``failed``
    (``model_error``), the final Msg is ``model_error_text``."""
    server.plan(Reply(text="The red mug is the best choice for you today", drop_after=6))
    harness, agent = build(HarnessConfig(model_error_text="Unavailable, try later.",
                                         cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server, max_retries=2), [])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert msg.get_text_content() == "Unavailable, try later."
    assert streamed(events).endswith("Unavailable, try later.")
    assert report.spent_usd > 0


# ====================================================== 12. shadow mode and env


async def test_shadow_mode_still_cuts_at_the_deadline(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    ran = Ran()
    server.plan(*searches(1), Reply(text="late", delay_s=3))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1), make_model(server), shop_tools(ran))
    started = time.monotonic()
    _, msg = await reply(harness, agent)
    assert time.monotonic() - started < 1.7
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert report.mode == "shadow"
    assert (msg.get_text_content() or "").startswith(FALLBACK_START)
    stops = [d for d in report.decisions if d.action == "stop"]
    assert stops and all(d.enforced for d in stops)


async def test_shadow_mode_lets_the_model_pass_its_caps(server: FakeOpenAI, make_model: Any) -> None:
    """README: shadow mode decides and records, refuses nothing (the
    deadline aside)."""
    ran = Ran()
    server.plan(*searches(4), Reply(text="Mug 3."))
    harness, agent = build(HarnessConfig(tools=SHOP, max_model_calls=2, max_tool_calls=1, mode="shadow"),
                           make_model(server), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(ran.of("search")) == 4 and len(server.requests) == 5
    assert msg.get_text_content() == "Mug 3."
    assert report.model_calls == 5 and report.tool_calls == {"search": 4}
    assert all(not d.enforced for d in report.decisions if d.action in ("refuse", "stop"))
    assert any(d.action == "refuse" and d.code == "quota_exhausted" for d in report.decisions)


async def test_env_flags_are_read_once_at_construction(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]), Reply(text="No."))
    harness, agent = build(HarnessConfig(tools=SHOP), make_model(server), shop_tools(ran))
    monkeypatch.setenv("HARNESS_ENABLED", "0")
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    _, msg = await reply(harness, agent)
    assert ran.of("cancel_order") == []
    assert harness.last_report(agent).refusals == {"permission_denied": 1}


# ====================================================== 13. telling the truth


async def test_a_claimed_cancellation_that_was_refused_is_corrected(server: FakeOpenAI, make_model: Any) -> None:
    """README: an answer claiming an action that never succeeded is
    corrected, ``incomplete`` (``unsupported_claim``), and the correction
    follows the answer in the stream."""
    ran = Ran()
    tools = {**SHOP, "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                                claims=[r"\bcancell?ed\b"])}
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]),
                Reply(text="I cancelled order A-9 for you."))
    harness, agent = build(HarnessConfig(tools=tools), make_model(server), shop_tools(ran))
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert ran.of("cancel_order") == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")
    text = msg.get_text_content() or ""
    assert "I cancelled order A-9" not in text and "did not succeed" in text
    assert streamed(events).endswith(text)


async def test_the_finishing_tool_at_the_call_cap_delivers_its_answer(server: FakeOpenAI, make_model: Any) -> None:
    """README: a finished answer is delivered even when a limit blocks the
    model's last word; no extra model round is made."""
    ran = Ran()
    got: list[str] = []

    async def submit_answer(answer: str) -> str:
        """Give the final answer. Args: answer (str): The answer."""
        got.append(answer)
        return "delivered"

    server.plan(*searches(1), Reply(tool_calls=[("submit_answer", {"answer": "The red mug, 3 EUR."})]),
                Reply(text="never"))
    harness, agent = build(HarnessConfig(tools={**SHOP, "submit_answer": ToolPolicy(role="finish")},
                                         max_model_calls=2), make_model(server), [*shop_tools(ran), submit_answer])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 2 and got == ["The red mug, 3 EUR."]
    assert msg.get_text_content() == "The red mug, 3 EUR."
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished")


async def test_the_report_carries_no_raw_arguments_by_default(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``record_raw`` False: reports and decisions carry raw
    arguments/results only when set."""
    ran = Ran()
    server.plan(Reply(tool_calls=[("cancel_order", {"order_id": "ORD-77Q1-ZEBRA", "user_id": "u-77"})]),
                Reply(tool_calls=[("search", {"q": "purple giraffe mug"})]),
                Reply(text="Done."))
    harness, agent = build(HarnessConfig(tools=SHOP), make_model(server), shop_tools(ran))
    await reply(harness, agent)
    report = harness.last_report(agent)
    dumped = report.to_json()
    assert report.refusals == {"permission_denied": 1}
    assert "ORD-77Q1-ZEBRA" not in dumped and "purple giraffe" not in dumped


# ====================================================== 14. a call cut at the deadline before it answered

# README: a call "cut ... is charged its request and what streamed", and "spent_usd <= cap_usd
# ... guaranteed outright ... with max_tokens set". A call the deadline cut before its first
# byte was charged the harness's stop text as the model's output (ModelGuard._bounded returned
# it as a response, and ModelGuard.call charged it through _usage, with a false
# "usage_estimated" decision); mended, these guard it.


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
async def test_a_call_cut_before_it_answered_charges_no_output(
    server: FakeOpenAI, make_model: Any, stream: bool,
) -> None:
    ran = Ran()
    server.plan(*searches(1, usage=(100, 10)), Reply(text="late", delay_s=3))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1, cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server, stream=stream), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert report.reason == "deadline"
    assert report.output_tokens == 10  # nothing streamed in the cut call
    # charged its request (and what streamed): an estimate, said as such (round 82), never the stop text
    assert [d.detail for d in report.decisions if d.action == "usage_estimated"] == [
        "a call stopped before its answer ended: charged its request and what it sent, estimated"]


async def test_a_call_cut_before_it_answered_never_takes_the_spend_past_the_cap(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """``max_tokens=20`` (the estimate is a bound), output at $1,000/M: the
    second call fits what is left of ``cap_usd`` and is cut by the deadline
    before it answers; the fallback text (200+ characters) is charged as 50+
    output tokens, and the run's spend passes its cap."""
    ran = Ran()
    server.plan(*searches(1, usage=(100, 20)), Reply(text="late", delay_s=3))
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=20))
    cost = CostPolicy(cap_usd=0.045, prices={"gpt-test": ModelPrice(1.0, 1000.0)})
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=1, cost=cost), model, shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 2 and report.reason == "deadline"
    assert report.spent_usd <= 0.045, report.spent_usd


# ====================================================== 15. wrap-up and abandoned streams


async def test_the_default_wrap_up_window_narrows_a_call_near_the_deadline(server: FakeOpenAI, make_model: Any) -> None:
    """README: the default wrap-up window is max(min(10 s, 15 % of the run's
    time), 1.5 × the slowest model call so far); near the deadline the run
    is constrained (``tool_choice`` narrowed, ``none`` without a finishing
    tool) and hinted."""
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})], delay_s=1.0), Reply(text="The red mug."))
    harness, agent = build(HarnessConfig(tools=SHOP, deadline_s=2.5), make_model(server), shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert server.requests[1].get("tool_choice") == "none"
    assert msg.get_text_content() == "The red mug."
    assert report.terminal_state is TerminalState.COMPLETED


async def test_a_stream_dropped_without_closing_is_settled_abandoned_by_the_next_reply(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: a new reply settles (``cancelled``, reason ``abandoned``) a
    run whose stream its consumer dropped without closing; the next reply
    runs normally."""
    server.plan(Reply(text="The red mug is the best choice " * 10, chunk_delay_s=0.01), Reply(text="A blue cup."))
    seen: list[Any] = []
    harness, agent = build(HarnessConfig(on_report=seen.append), make_model(server), [])
    with harness.acting_for(U42):
        stream = agent.reply_stream(UserMsg("user", "which mug?"))
        async for item in stream:
            if isinstance(item, TextBlockDeltaEvent):
                break
    _, msg = await reply(harness, agent, prompt="and a cup?")
    assert msg.get_text_content() == "A blue cup."
    assert [(r.terminal_state, r.reason) for r in seen] == [
        (TerminalState.CANCELLED, "abandoned"), (TerminalState.COMPLETED, "answered")]
    del stream


# ====================================================== 16. sub-agents under the lead's deadline and caps


async def test_a_slow_sub_agent_ends_within_the_leads_deadline(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    harness = Harness(HarnessConfig(tools=SHOP, deadline_s=1.5), load_entry_points=False)
    _, child = build(None, make_model(server, model="sub-model"), shop_tools(ran), name="specialist",
                     harness=harness)
    _, lead = build(None, make_model(server, model="lead-model"), [delegating(child)], name="lead",
                    harness=harness)
    server.plan(Reply(tool_calls=[("ask_specialist", {"task": "best mug"})]), Reply(text="late", delay_s=3),
                Reply(text="never"))
    started = time.monotonic()
    _, msg = await reply(harness, lead)
    assert time.monotonic() - started < 2.1
    report = harness.last_report(lead)
    assert len(server.requests) == 2
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert [(c.terminal_state, c.reason) for c in report.children] == [(TerminalState.INCOMPLETE, "deadline")]
    assert (msg.get_text_content() or "").startswith(FALLBACK_START) and "late" not in (msg.get_text_content() or "")


async def test_parallel_sub_agents_cannot_pass_max_model_calls_together(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    harness = Harness(HarnessConfig(tools=SHOP, max_model_calls=4), load_entry_points=False)
    children = [build(None, make_model(server, model="sub-model"), shop_tools(ran), name=f"sub{i}",
                      harness=harness)[1] for i in range(2)]

    async def ask_both(task: str) -> str:
        """Ask two specialists at once. Args: task (str): What to research."""
        msgs = await asyncio.gather(*(c.reply(UserMsg("lead", task)) for c in children))
        return " | ".join(m.get_text_content() or "" for m in msgs)

    _, lead = build(None, make_model(server, model="lead-model"), [ask_both], name="lead", harness=harness)
    server.plan(Reply(tool_calls=[("ask_both", {"task": "best mug"})]), *searches(12))
    _, msg = await reply(harness, lead)
    report = harness.last_report(lead)
    assert len(server.requests) <= 4, len(server.requests)
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert sum(c.model_calls for c in report.children) <= 3


async def test_a_run_whose_provider_only_failed_reports_no_output_tokens(server: FakeOpenAI, make_model: Any) -> None:
    server.plan(fail(500, 10, delay_s=0.4))
    harness, agent = build(HarnessConfig(deadline_s=1, cost=CostPolicy(cap_usd=1.0, prices=PRICE)),
                           make_model(server, max_retries=8, retry_delay=0.1), [])
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert set(server.statuses) == {500}
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert report.output_tokens == 0, report.output_tokens


# ====================================================== 17. the non-streaming client


async def test_non_streaming_500s_for_good_give_model_error_text(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    server.plan(*searches(1), fail(500, 2))
    harness, agent = build(HarnessConfig(tools=SHOP, model_error_text="Unavailable, try later."),
                           make_model(server, stream=False, max_retries=1), shop_tools(ran))
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason, report.model_calls) == (TerminalState.FAILED, "model_error", 3)
    assert msg.get_text_content() == "Unavailable, try later."
    assert "scripted 500" not in streamed(events)


async def test_non_streaming_usd_cap_with_max_tokens(server: FakeOpenAI, make_model: Any) -> None:
    ran = Ran()
    server.plan(*searches(10, usage=(50, 1000)))
    model = make_model(server, stream=False, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(HarnessConfig(tools=SHOP, cost=CostPolicy(cap_usd=0.035, prices=PRICE)), model,
                           shop_tools(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 3 and report.spent_usd <= 0.035
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "result for query 2" in (msg.get_text_content() or "")

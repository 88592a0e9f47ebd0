"""A newcomer's pass over the README through the real client path.

AgentScope's real ``OpenAIChatModel`` talks to the scripted SSE server
(``server.py``); the agent is built exactly as the README's "Use it" block
builds it (``harness.instrument(toolkit)``, ``harness.middlewares()``,
``harness.acting_for``, ``harness.last_report``). Each test checks one
sentence of the README against what the user receives. Tests marked
``xfail(strict=True)`` are promises that do not hold today.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from server import FakeOpenAI, Reply, fail

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    ModelPrice,
    Prerequisite,
    Principal,
    TerminalState,
    ToolPolicy,
)

U42 = Principal(user_id="u-42", tenant="acme")
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
FALLBACK_START = "I could not complete this request"


# ------------------------------------------------------------ the README's shop


def shop(ran: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The README's two tools, recording what really ran."""

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.append(("lookup_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} of {user_id}: paid"

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order. Args: order_id (str): The order. user_id (str): Its owner."""
        ran.append(("cancel_order", {"order_id": order_id, "user_id": user_id}))
        return f"order {order_id} cancelled"

    return [lookup_order, cancel_order]


SHOP_TOOLS = {
    "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
    "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                               requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])]),
}


def build(config: HarnessConfig, model: Any, fns: list[Any], **agent_kw: Any) -> tuple[Harness, Agent]:
    """The README's construction, verbatim apart from the model."""
    harness = Harness(config, load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in fns]))
    agent = Agent(name="shop", system_prompt="You help with orders.", model=model, toolkit=toolkit,
                  middlewares=harness.middlewares(),
                  injection_config=InjectionConfig(inject_runtime_state=False), **agent_kw)
    return harness, agent


async def reply(harness: Harness, agent: Agent, principal: Principal | None = U42,
                prompt: str = "cancel my last order", **kw: Any) -> tuple[list[Any], Msg]:
    """One streamed reply as ``principal``: the events and the final Msg."""
    events: list[Any] = []
    final = None

    async def go() -> None:
        nonlocal final
        async for item in agent.reply_stream(UserMsg("user", prompt), yield_final_msg=True, **kw):
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


def tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m["role"] != "tool":
            continue
        c = m["content"]
        out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


# ------------------------------------------------------------ 1. customer support


async def test_readme_use_it_example_on_the_real_client(server: FakeOpenAI, make_model: Any) -> None:
    """README "Use it": the same script through real SSE (arguments split
    across chunks); the README's printed line, what ran, what the model read."""
    ran: list[tuple[str, dict[str, Any]]] = []
    server.plan(
        Reply(tool_calls=[("cancel_order", {"order_id": "A-9", "user_id": "u-77"})]),
        Reply(tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]),
        Reply(tool_calls=[("cancel_order", {"order_id": "A-1", "user_id": "u-42"})]),
        Reply(text="Cancelled A-1."),
    )
    harness, agent = build(HarnessConfig(tools=SHOP_TOOLS, deadline_s=120), make_model(server), shop(ran))
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    line = f"{msg.get_text_content()} | {report.terminal_state.value} {report.tool_calls} {report.refusals}"
    assert line == "Cancelled A-1. | completed {'lookup_order': 1, 'cancel_order': 1} {'permission_denied': 1}"
    assert ran == [("lookup_order", {"order_id": "A-1", "user_id": "u-42"}),
                   ("cancel_order", {"order_id": "A-1", "user_id": "u-42"})]
    assert server.runaway == 0 and len(server.requests) == 4
    (refusal,) = tool_results(server.requests[1])
    assert refusal.startswith("[harness:permission_denied]")
    assert "u-77" not in streamed(events) and "[harness:" not in streamed(events)
    assert report.reason == "answered"
    refused = [d for d in report.decisions if d.action == "refuse"]
    assert [(d.hook, d.code, d.tool) for d in refused] == [("authorization_gate", "permission_denied", "cancel_order")]


async def test_cancel_needs_its_own_lookup_read_in_an_earlier_turn(server: FakeOpenAI, make_model: Any) -> None:
    """``requires`` + ``identity_args`` on the real client: a cancel before
    any lookup, and one in the same parallel batch as its lookup, are
    ``prerequisite_missing``; a cancel that leaves ``user_id`` out is told
    the signed-in user's value; only the cancel after the lookup runs."""
    ran: list[tuple[str, dict[str, Any]]] = []
    own = {"order_id": "A-1", "user_id": "u-42"}
    server.plan(
        Reply(tool_calls=[("cancel_order", own)]),
        Reply(tool_calls=[("lookup_order", own), ("cancel_order", own)]),
        Reply(tool_calls=[("cancel_order", {"order_id": "A-1"})]),
        Reply(tool_calls=[("cancel_order", own)]),
        Reply(text="Order A-1 is cancelled."),
    )
    harness, agent = build(HarnessConfig(tools=SHOP_TOOLS, deadline_s=120), make_model(server), shop(ran))
    _, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert ran == [("lookup_order", own), ("cancel_order", own)]
    told = tool_results(server.requests[-1])
    assert told[0].startswith("[harness:prerequisite_missing]")
    assert told[2].startswith("[harness:prerequisite_missing]")  # same batch as its lookup
    assert told[3].startswith("[harness:bad_arguments]") and '"u-42"' in told[3]
    assert "order A-1 cancelled" in told[4]
    assert report.refusals == {"prerequisite_missing": 2}
    assert report.tool_calls == {"lookup_order": 1, "cancel_order": 1}
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")
    assert msg.get_text_content() == "Order A-1 is cancelled."


async def test_ignored_permission_denied_ends_in_at_most_4_calls_with_what_was_found(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: "an ignored `permission_denied` in 3–4" model calls; the
    user gets the fallback with what the run found, never a cancellation."""
    ran: list[tuple[str, dict[str, Any]]] = []
    server.plan(Reply(tool_calls=[("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]))
    server.plan(*[Reply(tool_calls=[("cancel_order", {"order_id": f"B-{i}", "user_id": "u-77"})]) for i in range(12)])
    harness, agent = build(HarnessConfig(tools=SHOP_TOOLS), make_model(server), shop(ran))
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) <= 1 + 4
    assert ran == [("lookup_order", {"order_id": "A-1", "user_id": "u-42"})]
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:permission_denied")
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "order A-1 of u-42: paid" in text
    assert streamed(events).endswith(text)


# ------------------------------------------------------------ 2. USD cap


async def search(q: str) -> str:
    """Search the catalogue. Args: q (str): The query."""
    return f"result for {q}: item {q}-{len(q) * 7} costs {len(q)} EUR and ships in {len(q) % 5} days"


def priced(cap: float, **kw: Any) -> CostPolicy:
    return CostPolicy(cap_usd=cap, prices={"gpt-test": ModelPrice(input_per_mtok=1.0, output_per_mtok=10.0)}, **kw)


async def test_usd_cap_with_max_tokens_is_never_passed(server: FakeOpenAI, make_model: Any) -> None:
    """README "What a cap guarantees": with ``max_tokens`` set and the input
    estimate at or above what the provider bills, ``spent_usd <= cap_usd``;
    the call that would not fit is not made; ``incomplete`` (``budget``)
    with the fallback and what the run found. Usage comes in the last SSE
    chunk and is charged exactly."""
    from agentscope.model import OpenAIChatModel

    server.plan(*[Reply(tool_calls=[("search", {"q": f"query {i} about topic {i * 13}"})], usage=(50, 1000))
                  for i in range(20)])
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, cost=priced(0.035)),
                           model, [search])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert len(server.requests) == 3 and all(b["max_completion_tokens"] == 1000 for b in server.requests)
    assert report.spent_usd == pytest.approx(3 * (50 * 1.0 + 1000 * 10.0) / 1e6)
    assert report.spent_usd <= 0.035
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    text = msg.get_text_content() or ""
    assert "budget" in text and "query 2 about topic 26" in text
    assert streamed(events).endswith(text)


async def test_a_provider_that_sends_no_usage_is_charged_an_estimate(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README "No usage, no free ride": a stream without a usage chunk is
    charged an estimate and a ``usage_estimated`` decision says so once;
    the cap still stops the run."""
    import server as scripted_server

    chunks = scripted_server._chunks
    monkeypatch.setattr(scripted_server, "_chunks", lambda t, c, u, _inc, *rest: chunks(t, c, u, False, *rest))
    server.plan(*[Reply(tool_calls=[("search", {"q": f"query {i} " + "x" * 400})]) for i in range(20)])
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, cost=priced(0.01)),
                           make_model(server), [search])
    await reply(harness, agent)
    report = harness.last_report(agent)
    assert report.spent_usd > 0 and report.output_tokens > 0
    assert [d.action for d in report.decisions].count("usage_estimated") == 1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert report.spent_usd <= 0.01


async def test_no_tier_model_means_no_swap_is_reported_or_told(server: FakeOpenAI, make_model: Any) -> None:
    """README: ``tier_models`` (``lite``, ``minimal``) are the cheaper
    models; "Tells the truth". A policy with none configured must not tell
    the model, nor record in the report, a swap that never happened."""
    from agentscope.model import OpenAIChatModel

    server.plan(*[Reply(tool_calls=[("search", {"q": f"query {i} about topic {i * 13}"})], usage=(50, 1000))
                  for i in range(20)])
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, cost=priced(0.035)),
                           model, [search])
    await reply(harness, agent)
    report = harness.last_report(agent)
    assert {b["model"] for b in server.requests} == {"gpt-test"}
    sent = " ".join(t for b in server.requests for m in b["messages"] if m["role"] == "user"
                    for t in ([m["content"]] if isinstance(m["content"], str) else [p.get("text", "") for p in m["content"]]))
    assert "lite model" not in sent and "minimal model" not in sent
    assert "swap_model" not in [d.action for d in report.decisions]


async def test_budget_question_then_extension_continues_on_the_real_client(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README "Ask a human": ``CostPolicy(on_exhausted="ask")`` ends the
    reply ``waiting_input`` with a question; ``harness.extend(agent,
    usd=0.25)`` and the next reply continues and completes."""
    server.plan(*[Reply(tool_calls=[("search", {"q": f"query {i}"})], usage=(50, 1000)) for i in range(4)],
                Reply(text="The best is query 3.", usage=(50, 1000)))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")},
                                         cost=priced(0.025, on_exhausted="ask")), make_model(server), [search])
    _, msg = await reply(harness, agent)
    first = harness.last_report(agent)
    assert first.terminal_state == TerminalState.WAITING_INPUT and len(server.requests) == 2
    assert "budget" in (msg.get_text_content() or "")
    harness.extend(agent, usd=0.25)
    _, msg = await reply(harness, agent, prompt="yes, go on")
    report = harness.last_report(agent)
    assert msg.get_text_content() == "The best is query 3."
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.extensions and report.extensions[0]["by"] == 0.25


# ------------------------------------------------------------ 3. deadline


async def test_deadline_2s_slow_answer_after_a_tool_round_hands_over_what_was_found(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """``deadline_s=2``, the second answer takes 3 s: the reply ends by
    about 2 s, ``incomplete`` (``deadline``), the fallback with what the
    run found, and the stream ends with it."""
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})]),
                Reply(text="The red mug costs 3 EUR.", delay_s=3.0))
    harness, agent = build(HarnessConfig(deadline_s=2), make_model(server), [search])
    started = time.monotonic()
    events, msg = await reply(harness, agent)
    elapsed = time.monotonic() - started
    report = harness.last_report(agent)
    assert elapsed < 2.5, elapsed
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    text = msg.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "result for mug" in text
    assert "The red mug costs 3 EUR." not in streamed(events)
    assert streamed(events).endswith(text)


async def test_a_tool_sleeping_past_the_deadline_is_reported_in_flight(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README "The deadline bounds tools too": the context gets the
    ``run_concluded`` note, the report lists the call in ``in_flight`` with a
    ``liveness_watchdog`` stop (``on_acting``, ``deadline``), no further
    model call."""
    cut: list[str] = []

    async def warehouse(order_id: str) -> str:
        """Ask the warehouse. Args: order_id (str): The order."""
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            cut.append(order_id)
            raise
        return "ok"

    server.plan(Reply(tool_calls=[("search", {"q": "mug"})]),
                Reply(tool_calls=[("warehouse", {"order_id": "A-1"})]), Reply(text="never said"))
    harness, agent = build(HarnessConfig(deadline_s=2), make_model(server), [search, warehouse])
    started = time.monotonic()
    _, msg = await reply(harness, agent)
    assert time.monotonic() - started < 2.5
    report = harness.last_report(agent)
    assert cut == ["A-1"] and len(server.requests) == 2
    assert [f.split(":")[0] for f in report.in_flight] == ["warehouse"]
    assert any((d.hook, d.point, d.action, d.code) == ("liveness_watchdog", "on_acting", "stop", "deadline")
               for d in report.decisions)
    from agentscope.message import ToolResultBlock
    notes = [str(b.output) for m in agent.state.context if not isinstance(m.content, str)
             for b in m.content if isinstance(b, ToolResultBlock)]
    assert "[harness:run_concluded] The call to warehouse was stopped at the run's deadline" in notes[-1]
    assert "never said" not in (msg.get_text_content() or "")


# ------------------------------------------------------------ 4. secrets


SECRET = "tok_SUPERSECRET_12345"
ENV_SECRET = "envsecret-9f8e7d6c5b4a"
OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


async def test_no_secret_reaches_the_user_from_text_thinking_args_results_or_errors(
    server: FakeOpenAI, make_model: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Secrets streamed split across SSE chunks (4 characters a chunk) in
    the text, the thinking and the tool-call arguments, returned by a tool,
    raised by a tool: no streamed event, final message or report holds them,
    and the finishing tool receives its argument redacted."""
    import server as scripted_server

    monkeypatch.setenv("SHOP_TOKEN", ENV_SECRET)
    thinking = [f"I recall {SECRET} from before."]
    chunks = scripted_server._chunks

    def with_thinking(text: Any, calls: Any, usage: Any, include_usage: bool, deltas: Any = None) -> Any:
        out = chunks(text, calls, usage, include_usage, deltas)
        if thinking:
            t = thinking.pop(0)
            out[1:1] = [({"reasoning_content": t[i:i + 5]}, None, None) for i in range(0, len(t), 5)]
        return out

    monkeypatch.setattr(scripted_server, "_chunks", with_thinking)
    got: list[str] = []

    async def vault(name: str) -> str:
        """Read a vault entry. Args: name (str): The entry."""
        return f"entry {name}: password is {SECRET}; key {OPENAI_KEY}; env {ENV_SECRET}"

    async def broken(name: str) -> str:
        """Open a vault. Args: name (str): The entry."""
        raise ValueError(f"could not open vault with {SECRET} and {ENV_SECRET}")

    async def deliver(answer: str) -> str:
        """Deliver the answer. Args: answer (str): The answer."""
        got.append(answer)
        return answer

    server.plan(
        Reply(text=f"Checking {SECRET} now.", tool_calls=[("vault", {"name": SECRET}), ("broken", {"name": "x"})]),
        Reply(tool_calls=[("deliver", {"answer": f"Your token is {SECRET}, {ENV_SECRET}, {OPENAI_KEY}."})]),
        Reply(text="sent"),
    )
    config = HarnessConfig(secret_values=[SECRET], secret_env=["SHOP_TOKEN"],
                           tools={"deliver": ToolPolicy(role="finish")})
    harness, agent = build(config, make_model(server), [vault, broken, deliver])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    shown = "".join(e.model_dump_json() for e in events) + msg.model_dump_json() + report.to_json()
    for secret in (SECRET, ENV_SECRET, OPENAI_KEY, "SUPERSECRET"):
        assert secret not in shown
        assert secret not in got[0]
    assert report.terminal_state == TerminalState.COMPLETED
    assert any(type(e).__name__ == "ThinkingBlockDeltaEvent" for e in events)
    assert "[redacted:secret_value]" in (msg.get_text_content() or "")
    for result in tool_results(server.requests[1]):  # what the model read
        assert SECRET not in result and ENV_SECRET not in result and OPENAI_KEY not in result


async def test_plain_prose_streams_progressively(server: FakeOpenAI, make_model: Any) -> None:
    """README: "Text streams progressively (held back only while it could
    still become a secret)". A default config (no ``redact_patterns``, no
    ``secret_values``), an answer of plain words streamed 4 characters every
    40 ms: bare AgentScope shows its first words after ~0.1 s; the harnessed
    stream showed nothing for 128 characters (~1.3 s)."""
    answer = "The red mug costs twelve euros and ships tomorrow from Berlin. " * 3
    server.plan(Reply(text=answer, chunk_delay_s=0.04))
    harness, agent = build(HarnessConfig(), make_model(server), [])
    started = time.monotonic()
    first: float | None = None
    with harness.acting_for(U42):
        async for item in agent.reply_stream(UserMsg("user", "which mug?")):
            if first is None and isinstance(item, TextBlockDeltaEvent) and item.delta.strip():
                first = time.monotonic() - started
    assert first is not None
    assert first < 0.6, f"first text shown after {first:.2f}s"


# ------------------------------------------------------------ 5. provider errors


async def test_429_then_500_then_success_completes_and_counts_attempts(
    server: FakeOpenAI, make_model: Any,
) -> None:
    server.plan(fail(429), fail(500), Reply(text="A red mug."))
    harness, agent = build(HarnessConfig(model_error_text="Unavailable, try later."),
                           make_model(server, max_retries=2), [])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert server.statuses == [429, 500, 200]
    assert msg.get_text_content() == "A red mug." == streamed(events)
    assert (report.terminal_state, report.reason, report.model_calls) == (TerminalState.COMPLETED, "answered", 3)


@pytest.mark.parametrize("failure", ["500", "client timeout"])
async def test_a_provider_failing_for_good_gives_model_error_text(
    server: FakeOpenAI, make_model: Any, failure: str,
) -> None:
    """README: ``failed`` (``model_error``), the final Msg is
    ``model_error_text`` (a client's own timeout included), after a tool
    round too, and the stream says the same; nothing of the error leaks."""
    if failure == "500":
        server.plan(Reply(tool_calls=[("search", {"q": "mug"})]), fail(500, 3))
        model = make_model(server, max_retries=2)
    else:
        server.plan(Reply(tool_calls=[("search", {"q": "mug"})]), *[Reply(text="late answer", delay_s=3) for _ in range(2)])
        model = make_model(server, max_retries=1, timeout_s=0.5)
    harness, agent = build(HarnessConfig(model_error_text="Unavailable, try later.", deadline_s=20), model, [search])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert report.model_calls == len(server.requests)  # AgentScope's retries counted
    assert msg.get_text_content() == "Unavailable, try later."
    assert streamed(events).endswith("Unavailable, try later.")
    assert "scripted 500" not in streamed(events) and "late answer" not in streamed(events)


# ------------------------------------------------------------ 6. structured output under caps


def pick_schema() -> type:
    from pydantic import BaseModel

    class Pick(BaseModel):
        product: str
        price_eur: int

    return Pick


async def test_structured_output_finishes_after_the_tool_call_cap_refuses(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """``max_tool_calls=2``: the third search is refused
    (``quota_exhausted``); AgentScope's ``GenerateStructuredOutput`` is not
    charged to the cap, and the reply ends with the structured output."""
    server.plan(Reply(tool_calls=[("search", {"q": "red"})]), Reply(tool_calls=[("search", {"q": "blue"})]),
                Reply(tool_calls=[("search", {"q": "green"})]),
                Reply(tool_calls=[("GenerateStructuredOutput", {"product": "red mug", "price_eur": 3})]))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, max_tool_calls=2),
                           make_model(server), [search])
    _, msg = await reply(harness, agent, structured_schema=pick_schema())
    report = harness.last_report(agent)
    assert msg.structured_output == {"product": "red mug", "price_eur": 3}
    assert report.refusals == {"quota_exhausted": 1}
    assert report.tool_calls["search"] == 2
    assert report.terminal_state == TerminalState.COMPLETED and server.runaway == 0


async def test_a_structured_reply_made_to_conclude_gets_narrowed_rounds(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """README: a stopped structured reply gets up to two rounds narrowed to
    ``GenerateStructuredOutput`` (``tool_choice`` on the wire) instead of a
    text fallback; the run is reported as the stop made it."""
    server.plan(Reply(tool_calls=[("search", {"q": "red"})]), Reply(tool_calls=[("search", {"q": "blue"})]),
                *[Reply(tool_calls=[("search", {"q": f"more {i}"})]) for i in range(3)],
                Reply(tool_calls=[("GenerateStructuredOutput", {"product": "red mug", "price_eur": 3})]))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, max_tool_calls=2),
                           make_model(server), [search])
    _, msg = await reply(harness, agent, structured_schema=pick_schema())
    report = harness.last_report(agent)
    narrowed = {"type": "function", "function": {"name": "GenerateStructuredOutput"}}
    assert server.requests[-1]["tool_choice"] == narrowed
    assert msg.structured_output == {"product": "red mug", "price_eur": 3}
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:quota_exhausted")


async def test_a_structured_reply_at_max_model_calls_gets_its_narrowed_rounds_only(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """``max_model_calls=2`` with a structured reply owed: as the README
    says, the stopped reply's output rounds (narrowed to
    ``GenerateStructuredOutput`` on the wire, at most two) are made past the
    cap; nothing else is, and the run is reported as the cap stopped it."""
    server.plan(Reply(tool_calls=[("search", {"q": "red"})]), Reply(tool_calls=[("search", {"q": "blue"})]),
                Reply(tool_calls=[("GenerateStructuredOutput", {"product": "red mug", "price_eur": 3})]))
    harness, agent = build(HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, max_model_calls=2),
                           make_model(server), [search])
    _, msg = await reply(harness, agent, structured_schema=pick_schema())
    report = harness.last_report(agent)
    narrowed = {"type": "function", "function": {"name": "GenerateStructuredOutput"}}
    assert len(server.requests) == 3 and server.requests[-1]["tool_choice"] == narrowed
    assert msg.structured_output == {"product": "red mug", "price_eur": 3}
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")


# ------------------------------------------------------------ rate limits


@pytest.mark.parametrize("stop", ["daily quota", "model rate limit"])
async def test_a_stop_before_a_model_call_hands_over_what_was_found(
    server: FakeOpenAI, make_model: Any, stop: str,
) -> None:
    """README "What the caller receives": a run stopped for its budget (or
    any other limit) gets ``fallback_text`` "plus a short, redacted list of
    what the run found"; "a stopped run hands over what it found". The
    ``cap_usd`` stop does (see the cap test above); the daily-quota and
    model rate-limit stops do not."""
    from agentscope.model import OpenAIChatModel

    from agentscope_harness import RateLimit

    server.plan(*[Reply(tool_calls=[("search", {"q": f"query {i}"})], usage=(50, 1000)) for i in range(6)])
    if stop == "daily quota":
        cost = CostPolicy(daily_quota_usd=0.025, prices={"gpt-test": ModelPrice(input_per_mtok=1.0, output_per_mtok=10.0)})
        config = HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, cost=cost)
        reason = "budget"
    else:
        config = HarnessConfig(rate_limits=[RateLimit(scope="principal", calls_per_min=1, wait_s=0)], deadline_s=5)
        reason = "rate_limited"
    model = make_model(server, parameters=OpenAIChatModel.Parameters(max_tokens=1000))
    harness, agent = build(config, model, [search])
    events, msg = await reply(harness, agent)
    report = harness.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, reason)
    assert report.tool_calls["search"] >= 1
    text = msg.get_text_content() or ""
    assert streamed(events).endswith(text)
    assert "result for query 0" in text


# ------------------------------------------------------------ README blocks and CLI


async def test_readme_custom_hook_block_on_the_real_client(server: FakeOpenAI, make_model: Any) -> None:
    """README "Writing a hook", with ``is_weekend`` and ``config`` filled in."""
    from agentscope_harness import HookContext, HookRejectSignal, harness_hook

    def is_weekend() -> bool:
        return True

    @harness_hook("pre_tool_call", priority=25, name="no_refunds_on_weekends", kind="safety")
    def no_refunds_on_weekends(ctx: HookContext) -> None:
        if ctx.tool.name == "refund" and is_weekend():
            raise HookRejectSignal("Refunds are not processed at weekends; tell the user.",
                                   code="policy_refused")

    refunded: list[str] = []

    async def refund(order_id: str) -> str:
        """Refund an order. Args: order_id (str): The order."""
        refunded.append(order_id)
        return "refunded"

    server.plan(Reply(tool_calls=[("refund", {"order_id": "A-1"})]), Reply(text="No refunds at weekends."))
    config = HarnessConfig()
    harness = Harness(config, hooks=[no_refunds_on_weekends], load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(refund, permission=ALLOW)]))
    agent = Agent(name="shop", system_prompt="You help with orders.", model=make_model(server), toolkit=toolkit,
                  middlewares=harness.middlewares())
    _, msg = await reply(harness, agent)
    assert refunded == []
    assert tool_results(server.requests[1]) == ["[harness:policy_refused] Refunds are not processed at weekends; "
                                                 "tell the user."]
    assert harness.last_report(agent).refusals == {"policy_refused": 1}


async def test_cli_diff_policy_reads_a_log_written_by_on_report(
    server: FakeOpenAI, make_model: Any, tmp_path: Any,
) -> None:
    """README: ``agentscope-harness diff-policy reports.jsonl`` over a log
    of real-client reports (``on_report`` writing ``RunReport.to_json()``)
    with a candidate policy in shadow."""
    import json
    import pathlib
    import sys

    ran: list[tuple[str, dict[str, Any]]] = []
    own = {"order_id": "A-1", "user_id": "u-42"}
    server.plan(Reply(tool_calls=[("lookup_order", own)]), Reply(tool_calls=[("cancel_order", own)]),
                Reply(text="Cancelled A-1."))
    log = tmp_path / "reports.jsonl"
    def keep(report: Any) -> None:
        with log.open("a") as f:
            f.write(report.to_json() + "\n")

    config = HarnessConfig(tools=SHOP_TOOLS, on_report=keep)
    harness = Harness(config, candidate=HarnessConfig(tools=SHOP_TOOLS, max_tool_calls=1), load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in shop(ran)]))
    agent = Agent(name="shop", system_prompt="You help with orders.", model=make_model(server), toolkit=toolkit,
                  middlewares=harness.middlewares())
    await reply(harness, agent)
    assert len(ran) == 2  # the candidate refuses nothing live
    cli = pathlib.Path(sys.executable).with_name("agentscope-harness")
    proc = await asyncio.create_subprocess_exec(str(cli), "diff-policy", "--json", str(log),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert (summary["runs"], summary["differences"]) == (1, 1)
    assert summary["by_change"] == [{"live": "allow", "candidate": "refuse:quota_exhausted", "count": 1}]

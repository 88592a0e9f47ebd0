"""Issue 11 through the real client path: AgentScope's ``OpenAIChatModel``
(real ``openai`` client, real HTTP, real SSE parsing) against the scripted
server, with the harness on a real ``Agent``. Assertions are on the request
bodies the server logged and on what the user received.

Tests marked ``xfail(strict=True)`` describe the behaviour issue 11 asks for
and fail today; they start passing (visibly: strict) once the item is fixed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import pytest
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg
from hooks.hookkit import Ran, drive, shop_tools
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server import RUNAWAY_TEXT, SUMMARY, FakeOpenAI, Reply, _page, fail

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    ModelPrice,
    Principal,
    ToolPolicy,
)
from agentscope_harness.report import TerminalState

U42 = Principal(user_id="u-42", tenant="acme")
ID = {"user_id": "user_id"}
FALLBACK_START = "I could not complete this request"
ANSWER = "The red mug costs 12 EUR and ships tomorrow."


def finish_tool(ran: Ran) -> Any:
    """A finishing tool whose result is the answer it delivers, so "the
    finish tool's answer" means the same whether taken from its argument or
    from its result."""

    async def deliver(answer: str) -> str:
        """Deliver the final answer to the user.

        Args:
            answer (str): The answer.
        """
        ran.append(("deliver", {"answer": answer}))
        return answer

    return deliver


def shop_config(finish: bool = True, **kw: Any) -> HarnessConfig:
    """The shop's policies; with ``finish`` a run completes only through ``deliver``."""
    tools = {
        "search": ToolPolicy(role="retrieval"),
        "lookup_order": ToolPolicy(role="lookup", identity_args=ID),
        "cancel_order": ToolPolicy(role="mutation", identity_args=ID),
    }
    if finish:
        tools["deliver"] = ToolPolicy(role="finish")
    kw.setdefault("tools", tools)
    return HarnessConfig(**kw)


def tools_of(ran: Ran, *names: str) -> list[Any]:
    shop = {**shop_tools(ran), "deliver": finish_tool(ran)}
    return [shop[name] for name in names]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool messages of one request body, in order."""
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def outcome(h: Harness, agent: Any) -> tuple[Msg | None, BaseException | None]:
    """One reply whose ending item 9 has not settled yet: the final message
    or the exception the caller received (the report is read separately)."""
    try:
        _, final, _ = await drive(h, agent)
    except Exception as exc:
        return None, exc
    return final, None


def system_text(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    content = first["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


# ------------------------------------------------------------ prefix safety


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_table_and_message_prefix_stable_across_a_multi_round_run(
    server: FakeOpenAI, make_model: Any, real_agent: Any, stream: bool,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("search", {"q": "red mug"}), ("search", {"q": "blue \"mug\" ü"})]),
        Reply(tool_calls=[("lookup_order", {"order_id": "A-1002", "user_id": "u-42"})]),
        Reply(tool_calls=[("deliver", {"answer": ANSWER})]),
        Reply(text="Delivered."),
    )
    h, agent = real_agent(
        shop_config(), make_model(server, stream=stream),
        tools_of(ran, "search", "lookup_order", "deliver"),
    )
    _, final, report = await drive(h, agent, U42)

    # split and interleaved argument deltas reached the tools whole
    assert ran == [
        ("search", {"q": "red mug"}), ("search", {"q": "blue \"mug\" ü"}),
        ("lookup_order", {"order_id": "A-1002", "user_id": "u-42"}),
        ("deliver", {"answer": ANSWER}),
    ]
    bodies = server.requests
    assert len(bodies) >= 3 and server.runaway == 0
    assert all(b["stream"] is stream for b in bodies)
    tables = {canonical(b["tools"]) for b in bodies}
    assert len(tables) == 1
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["search", "lookup_order", "deliver"]
    for prev, curr in itertools.pairwise(bodies):
        old = prev["messages"]
        assert len(curr["messages"]) > len(old)
        assert canonical(curr["messages"][:len(old)]) == canonical(old)
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.tool_calls == {"search": 2, "lookup_order": 1, "deliver": 1}
    assert report.input_tokens == 100 * len(bodies) and report.output_tokens == 10 * len(bodies)
    assert FALLBACK_START not in (final.get_text_content() or "")


@settings(
    max_examples=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    first=st.text(max_size=40),
    second=st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
)
async def test_split_parallel_argument_deltas_reassemble_exactly(
    server: FakeOpenAI, make_model: Any, real_agent: Any, first: str, second: str,
) -> None:
    """Any argument text, cut in pieces and interleaved with a second call's,
    reaches each tool exactly as the model wrote it (one server for all
    examples: each plans its own two answers)."""
    ran = Ran()
    server.script.clear()  # what a failed (shrinking) example left unplayed
    server.plan(Reply(tool_calls=[("search", {"q": first}), ("select", {"pick": second})]),
                Reply(text="ok"))
    h, agent = real_agent(
        shop_config(tools={"search": ToolPolicy(role="retrieval")}),
        make_model(server), tools_of(ran, "search", "select"),
    )
    await drive(h, agent)
    assert sorted(ran) == [("search", {"q": first}), ("select", {"pick": second})]


async def test_harness_rules_end_the_system_prompt_of_every_request(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})]), Reply(text="A red mug."))
    h, agent = real_agent(shop_config(), make_model(server), tools_of(ran, "search", "deliver"))
    await drive(h, agent)
    rules = await h.system_prompt_addition()
    assert rules.startswith("\n\n# Harness rules\n")
    assert "deliver" in rules  # the finishing tool is named
    texts = {system_text(b) for b in server.requests}
    assert texts == {"You are a helpful shop assistant." + rules}


# ------------------------------------------------------------ identity


async def test_identity_gating_refuses_another_users_id_and_the_tool_never_runs(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("cancel_order", {"order_id": "A-1002", "user_id": "u-99"})]),
        Reply(text="I cannot cancel that order."),
    )
    h, agent = real_agent(
        shop_config(finish=False), make_model(server), tools_of(ran, "cancel_order"),
    )
    _, final, report = await drive(h, agent, U42)
    assert ran == []
    assert len(server.requests) == 2
    (refusal,) = tool_results(server.requests[1])
    assert refusal.startswith("[harness:permission_denied]")
    assert "'u-42'" in refusal
    assert report.refusals == {"permission_denied": 1}
    assert report.tool_calls == {}
    assert "[harness:" not in (final.get_text_content() or "")


# ------------------------------------------------------------ item 1: completed stays completed


async def test_finished_answer_delivered_when_max_model_calls_is_reached(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("deliver", {"answer": ANSWER})]), Reply(text="Delivered."))
    h, agent = real_agent(shop_config(max_model_calls=1), make_model(server), tools_of(ran, "deliver"))
    _, final, report = await drive(h, agent)
    assert ran == [("deliver", {"answer": ANSWER})]
    text = final.get_text_content() or ""
    assert FALLBACK_START not in text
    assert ANSWER in text
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished")
    assert len(server.requests) == 1  # the cap held


async def test_finished_answer_delivered_when_the_deadline_passes_in_the_last_call(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("deliver", {"answer": ANSWER})]),
        Reply(text="Delivered.", delay_s=1.3),
    )
    h, agent = real_agent(shop_config(deadline_s=1.0), make_model(server), tools_of(ran, "deliver"))
    _, final, report = await drive(h, agent)
    assert ran == [("deliver", {"answer": ANSWER})]
    text = final.get_text_content() or ""
    assert FALLBACK_START not in text
    assert ANSWER in text
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished")


# ------------------------------------------------------------ item 3: no silent $0


async def test_unpriced_model_is_never_charged_zero(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("search", {"q": "mug"})], usage=(1_800_000, 200)),
        Reply(tool_calls=[("search", {"q": "cup"})], usage=(1_800_000, 200)),
        Reply(text="Here are mugs."),
    )
    cost = CostPolicy(cap_usd=0.01, prices={"gpt-other": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(
        shop_config(finish=False, cost=cost), make_model(server, model="gpt-test"),
        tools_of(ran, "search"),
    )
    _, _, report = await drive(h, agent)
    named = [d for d in report.decisions if "gpt-test" in d.detail]
    assert named, "no decision names the unpriced model"
    # refused before any call, or charged a stated price that trips the cap
    assert len(server.requests) <= 1
    assert report.terminal_state != TerminalState.COMPLETED
    assert report.spent_usd > 0 or report.model_calls == 0


async def test_unpriced_tier_model_is_refused_at_construction(
    server: FakeOpenAI, make_model: Any,
) -> None:
    lite = make_model(server, model="gpt-lite")
    with pytest.raises(Exception, match="gpt-lite"):
        cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)}, tier_models={"lite": lite})
        Harness(HarnessConfig(cost=cost), load_entry_points=False)


# ------------------------------------------------------------ item 4: the deadline bounds everything


@pytest.mark.parametrize("late", [
    Reply(text="late answer", delay_s=4.0),
    Reply(text="The order A-1 has been cancelled and refunded in full. " * 3, chunk_delay_s=0.25),
], ids=["slow answer", "slow stream"])
async def test_deadline_bounds_a_slow_model_call(
    server: FakeOpenAI, make_model: Any, real_agent: Any, late: Reply,
) -> None:
    """Cut at the deadline: ``incomplete`` (``deadline``), the fallback, and
    the stream ends with what the final message says. Red team (slow
    stream): AgentScope's stream wrapper swallows the cancellation and ends
    the stream as ``interrupted``: the run was reported ``cancelled`` with
    AgentScope's interruption message."""
    server.plan(late)
    h, agent = real_agent(HarnessConfig(deadline_s=1.0), make_model(server), [])
    started = time.monotonic()
    events, final, report = await drive(h, agent)
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"reply took {elapsed:.1f}s under a 1 s deadline"
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    text = final.get_text_content() or ""
    assert text.startswith(FALLBACK_START) and "late answer" not in text
    streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert streamed.endswith(text)


async def test_tool_calls_arriving_after_the_deadline_never_run(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("cancel_order", {"order_id": "A-1002", "user_id": "u-42"})], delay_s=1.3),
        Reply(text="Cancelled."),
    )
    h, agent = real_agent(
        shop_config(deadline_s=1.0), make_model(server), tools_of(ran, "cancel_order"),
    )
    _, _, report = await drive(h, agent, U42)
    assert ran == []
    assert report.terminal_state == TerminalState.INCOMPLETE


async def test_deadline_bounds_a_tool_that_ignores_it(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """A streamed call to a tool that hangs: cut at the deadline, the run
    ends ``incomplete`` (``deadline``) with no second request."""
    stopped: list[str] = []

    async def hang(order_id: str) -> str:
        """Wait for an order's warehouse, forever.

        Args:
            order_id (str): The order.
        """
        try:
            await asyncio.sleep(30)
        finally:
            stopped.append(order_id)
        return "never"

    server.plan(Reply(tool_calls=[("hang", {"order_id": "A-1"})]), Reply(text="never said"))
    h, agent = real_agent(HarnessConfig(deadline_s=1.0), make_model(server), [hang])
    started = time.monotonic()
    _, final, report = await drive(h, agent)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"reply took {elapsed:.1f}s under a 1 s deadline"
    assert stopped == ["A-1"] and len(server.requests) == 1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "never said" not in (final.get_text_content() or "")


async def test_deadline_bounds_stacked_retries(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    server.plan(fail(500, times=12, delay_s=0.3))
    model = make_model(server, max_retries=3, client_max_retries=2)
    h, agent = real_agent(HarnessConfig(deadline_s=1.0), model, [])
    started = time.monotonic()
    await outcome(h, agent)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"{len(server.requests)} requests took {elapsed:.1f}s under a 1 s deadline"
    assert len(server.requests) <= 4


# ------------------------------------------------------------ item 9: model errors


async def test_retries_stack_as_documented(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """(AgentScope retries + 1) x (client retries + 1) requests per model
    call, as the conftest says; then the error reaches the harness."""
    server.plan(fail(500, times=4), Reply(text="never"))
    h, agent = real_agent(HarnessConfig(), make_model(server, max_retries=1, client_max_retries=1), [])
    _, error = await outcome(h, agent)
    assert server.statuses == [500] * 4
    assert error is not None or h.last_report(agent) is not None


async def test_provider_error_after_retries_ends_failed_with_model_error(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    server.plan(fail(500, times=2), Reply(text="never"))
    h, agent = real_agent(HarnessConfig(), make_model(server, max_retries=1), [])
    final, _ = await outcome(h, agent)
    report = h.last_report(agent)
    assert report is not None
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert report.model_calls == 2
    if final is not None:  # a fallback answer, never the raw exception text
        assert "scripted 500" not in (final.get_text_content() or "")


async def test_rate_limit_then_success_completes(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    server.plan(fail(429, times=1), Reply(text="A red mug."))
    h, agent = real_agent(HarnessConfig(), make_model(server, max_retries=1), [])
    _, final, report = await drive(h, agent)
    assert server.statuses == [429, 200]
    assert final.get_text_content() == "A red mug."
    assert report.terminal_state == TerminalState.COMPLETED


async def test_model_calls_counts_attempts(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    server.plan(fail(429, times=1), Reply(text="A red mug."))
    h, agent = real_agent(HarnessConfig(), make_model(server, max_retries=1), [])
    _, _, report = await drive(h, agent)
    assert report.model_calls == len(server.requests) == 2


# ------------------------------------------------------------ tiers and tool_choice


async def test_tier_swap_sends_the_lite_model_name(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("search", {"q": "mug"})], usage=(1_000_000, 0)),
        Reply(text="A red mug.", usage=(1_000, 100)),
    )
    lite = make_model(server, model="gpt-lite")
    cost = CostPolicy(
        cap_usd=1.0,
        prices={
            "gpt-test": ModelPrice(input_per_mtok=0.6, output_per_mtok=0.0),
            "gpt-lite": ModelPrice(input_per_mtok=0.1, output_per_mtok=1.0),
        },
        tier_models={"lite": lite},
    )
    h, agent = real_agent(
        shop_config(finish=False, cost=cost), make_model(server), tools_of(ran, "search"),
    )
    _, final, report = await drive(h, agent)
    assert [b["model"] for b in server.requests] == ["gpt-test", "gpt-lite"]
    assert canonical(server.requests[0]["tools"]) == canonical(server.requests[1]["tools"])
    old = server.requests[0]["messages"]
    assert canonical(server.requests[1]["messages"][:len(old)]) == canonical(old)
    assert final.get_text_content() == "A red mug."
    assert report.spent_usd == pytest.approx(0.6 + 0.0001 + 0.0001)
    assert [d.action for d in report.decisions].count("swap_model") == 1


async def test_wrap_up_narrows_tool_choice_to_the_finish_tool(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("deliver", {"answer": ANSWER})]), Reply(text="Delivered."))
    h, agent = real_agent(
        shop_config(deadline_s=30, wrap_up_s=30), make_model(server),
        tools_of(ran, "search", "deliver"),
    )
    _, _, report = await drive(h, agent)
    first = server.requests[0]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "deliver"}}
    assert len(first["tools"]) == 2  # narrowed by tool_choice, never by the table
    if len(server.requests) > 1:  # once terminal, no more tools
        assert server.requests[1]["tool_choice"] == "none"
    assert report.terminal_state == TerminalState.COMPLETED


async def test_enforcer_round_narrows_tool_choice_to_the_finish_tool(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(text="The red mug it is."),
        Reply(tool_calls=[("deliver", {"answer": ANSWER})]),
        Reply(text="Delivered."),
    )
    h, agent = real_agent(shop_config(), make_model(server), tools_of(ran, "search", "deliver"))
    _, _, report = await drive(h, agent)
    assert "tool_choice" not in server.requests[0]
    assert server.requests[1]["tool_choice"] == {"type": "function", "function": {"name": "deliver"}}
    assert canonical(server.requests[0]["tools"]) == canonical(server.requests[1]["tools"])
    assert report.terminal_state == TerminalState.COMPLETED


async def test_script_exhaustion_answers_done_and_is_counted(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """The server's own guard: a run that outlives its script still ends."""
    h, agent = real_agent(HarnessConfig(), make_model(server, stream=False), [])
    _, final, _ = await drive(h, agent)
    assert final.get_text_content() == RUNAWAY_TEXT
    assert server.runaway == 1


# ------------------------------------------------------------ items 6-8: what the user is told


def streamed_text(events: list[Any]) -> str:
    """What a streaming UI showed: every text delta, in order."""
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def message_texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text part of a request's messages."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    return out


async def test_refused_action_is_not_delivered_as_done(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    claim = "Order A-1002 has been cancelled for you."
    tools = dict(shop_config(finish=False).tools)
    tools["cancel_order"] = ToolPolicy(role="mutation", identity_args=ID, claims=[r"has been cancell?ed"])
    server.plan(
        Reply(tool_calls=[("cancel_order", {"order_id": "A-1002", "user_id": "u-99"})]),
        Reply(text=claim),
    )
    h, agent = real_agent(HarnessConfig(tools=tools), make_model(server), tools_of(ran, "cancel_order"))
    events, final, report = await drive(h, agent, U42)
    assert ran == []
    assert report.unsupported_claims == ["cancel_order"]
    assert report.terminal_state != TerminalState.COMPLETED
    for shown in (final.get_text_content() or "", streamed_text(events)):
        assert shown.strip() != claim, (final.get_text_content(), streamed_text(events), report.terminal_state)  # withheld, or corrected next to the claim


async def test_budget_stop_hands_over_what_was_found(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})], usage=(1_000_000, 0)), Reply(text="never"))
    cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": ModelPrice(input_per_mtok=0.97, output_per_mtok=0)})
    h, agent = real_agent(shop_config(finish=False, cost=cost), make_model(server), tools_of(ran, "search"))
    _, final, report = await drive(h, agent)
    assert len(server.requests) == 1  # stopped without another model call
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "red mug" in (final.get_text_content() or "")  # from the search result


async def test_tier_change_is_told_to_the_model_prefix_safely(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(tool_calls=[("search", {"q": "mug"})], usage=(1_000_000, 0)),
        Reply(text="A red mug.", usage=(1_000, 100)),
    )
    cost = CostPolicy(
        cap_usd=1.0, prices={"gpt-test": ModelPrice(input_per_mtok=0.6, output_per_mtok=0.0),
                             "gpt-lite": ModelPrice(input_per_mtok=0.1, output_per_mtok=0.0)},
        tier_models={"lite": make_model(server, model="gpt-lite")},
    )
    h, agent = real_agent(shop_config(finish=False, cost=cost), make_model(server), tools_of(ran, "search"))
    await drive(h, agent)
    first, second = server.requests
    old = first["messages"]
    assert canonical(second["messages"][:len(old)]) == canonical(old)
    added = message_texts(second["messages"][len(old):])
    assert any("<system-reminder>" in t and "budget" in t.lower() for t in added)


async def test_enforcer_round_streams_one_answer(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(
        Reply(text="The red mug it is."),
        Reply(tool_calls=[("deliver", {"answer": ANSWER})]),
        Reply(text="Delivered."),
    )
    h, agent = real_agent(shop_config(), make_model(server), tools_of(ran, "search", "deliver"))
    events, final, report = await drive(h, agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert streamed_text(events) == final.get_text_content()


def echo_last_tool_message(body: dict[str, Any]) -> str:
    """A model that echoes the fenced tool result and a code nobody issued."""
    return f"Found: {body['messages'][-1]['content']} [harness:budget_low] See above."


async def test_echoed_markers_never_reach_the_stream(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})]), Reply(text=echo_last_tool_message))
    h, agent = real_agent(shop_config(finish=False), make_model(server), tools_of(ran, "search"))
    events, _, _ = await drive(h, agent)
    shown = streamed_text(events)
    assert "red mug" in shown  # progressively streamed, not withheld
    assert "tool-output" not in shown and "[harness:" not in shown


async def test_echoed_markers_never_reach_the_final_answer(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()
    server.plan(Reply(tool_calls=[("search", {"q": "mug"})]), Reply(text=echo_last_tool_message))
    h, agent = real_agent(shop_config(finish=False), make_model(server), tools_of(ran, "search"))
    _, final, _ = await drive(h, agent)
    text = final.get_text_content() or ""
    assert "red mug" in text
    assert "tool-output" not in text and "[harness:" not in text


# ------------------------------------------------------------ AgentScope's own compression call



@pytest.mark.parametrize("stream", [False, True])
async def test_the_deadline_bounds_and_the_budget_charges_agentscopes_compression_call(
    server: FakeOpenAI, make_model: Any, real_agent: Any, stream: bool,
) -> None:
    """Red team: AgentScope's context compression calls the model itself
    (``generate_structured_output``), below ``on_model_call``: under a 2 s
    deadline it waited 6 s, was not counted, and its tokens were not charged.
    It is bounded by the time left, counted, and charged: cut, its request
    (third pass: $0); streamed, its provider's usage (third pass: an
    estimate of the input only)."""
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], delay_s=6.0, usage=(100_000, 5_000)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    )
    cost = CostPolicy(cap_usd=1.0, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(deadline_s=2.0, cost=cost), make_model(server, stream=stream,
                                                                               context_size=4000), [_page])
    started = time.monotonic()
    _, final, report = await drive(h, agent)
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 2 and report.model_calls == 2
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert any(d.point == "on_compress_context" and "deadline" in d.detail for d in report.decisions)
    assert report.spent_usd > (1000 * 2.0 + 10 * 8.0) / 1e6 * 2  # the first call, and the cut request

    server.script.clear()
    server.plan(  # in time: the compression is counted and its tokens charged
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(100_000, 5_000)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    )
    h, agent = real_agent(HarnessConfig(deadline_s=30.0, cost=cost), make_model(server, stream=stream,
                                                                                context_size=4000), [_page])
    _, final, report = await drive(h, agent)
    assert report.model_calls == 3 == len(server.requests) - 2
    assert report.spent_usd == pytest.approx((102_000 * 2.0 + 5_020 * 8.0) / 1e6)


async def test_an_unpriced_model_on_a_capped_budget_never_compresses(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """The unpriced model is refused before its first call, and AgentScope's
    compression of the long context (six requests, its strategies and
    retries) is refused too: it is never called, and the context is left to
    AgentScope's truncation."""
    cost = CostPolicy(cap_usd=0.10, prices={"gpt-priced": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(cost=cost), make_model(server, stream=False, model="gpt-unpriced",
                                                               context_size=4000), [])
    await drive(h, agent, prompt="Please read: " + "lorem ipsum dolor sit amet " * 600)
    server.plan(Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(200_000, 5_000)))
    _, _, report = await drive(h, agent, prompt="and?")
    assert server.requests == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unpriced_model")
    assert report.spent_usd == 0


async def test_every_answered_attempt_of_a_compression_is_charged(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Red team (second pass): AgentScope tries several strategies for the
    summary (forced, auto, none), each a billed answer; only the last one's
    usage was charged (0.244 of 0.645)."""
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(text="I will not call the tool", usage=(100_000, 50)),
        Reply(text="still no tool", usage=(100_000, 50)),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(100_000, 5_000)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    )
    cost = CostPolicy(cap_usd=5.0, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(deadline_s=30.0, cost=cost), make_model(server, stream=False,
                                                                                context_size=4000), [_page])
    _, _, report = await drive(h, agent)
    assert report.model_calls == len(server.requests) == 5
    billed_in, billed_out = 1000 + 3 * 100_000 + 1000, 10 + 50 + 50 + 5000 + 10
    assert report.spent_usd == pytest.approx((billed_in * 2.0 + billed_out * 8.0) / 1e6)


async def test_a_compression_that_does_not_fit_the_daily_quota_is_not_made(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Red team (second pass): the compression was made without the
    reservation every model call gets: a $0.0025 quota ended at $0.018."""
    from agentscope_harness import MemoryStore

    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(6000, 500)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    )
    store = MemoryStore()
    cost = CostPolicy(daily_quota_usd=0.0025, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)},
                      max_output_tokens=50)
    h, agent = real_agent(HarnessConfig(deadline_s=30.0, cost=cost, store=store),
                          make_model(server, stream=False, context_size=4000), [_page])
    _, _, report = await drive(h, agent, U42)
    assert await store.get_spend(U42.key) <= 0.0025
    assert len(server.requests) == 1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


async def test_a_compression_strategy_cut_after_another_answered_is_charged_its_request(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Red team (fourth pass): AgentScope's first strategy answered (billed),
    its second was cut at the deadline: only the first was charged."""
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(text="I will not call the tool", usage=(6000, 50)),
        Reply(text="late", delay_s=4.0, usage=(6000, 50)),
    )
    cost = CostPolicy(cap_usd=5.0, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(deadline_s=1.5, cost=cost), make_model(server, stream=False,
                                                                               context_size=4000), [_page])
    _, _, report = await drive(h, agent)
    answered = (1000 * 2.0 + 10 * 8.0 + 6000 * 2.0 + 50 * 8.0) / 1e6
    assert len(server.requests) == 3 and report.model_calls == 3
    assert report.spent_usd > answered + 1000 * 2.0 / 1e6  # and the cut request, estimated


async def test_a_compression_cut_after_failed_retries_is_charged_its_one_request(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Red team (fifth pass): two 500s (unbilled) then a request cut at the
    deadline were charged as three requests."""
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        *fail(500, 2),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], delay_s=4.0, usage=(6000, 500)),
    )
    cost = CostPolicy(cap_usd=5.0, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(deadline_s=1.5, cost=cost),
                          make_model(server, stream=False, context_size=4000, max_retries=2), [_page])
    _, _, report = await drive(h, agent)
    first = (1000 * 2.0 + 10 * 8.0) / 1e6
    compression = report.spent_usd - first
    assert len(server.requests) == 4
    assert 0 < compression < 0.012  # one request's estimate (~0.0085), not three


@pytest.mark.parametrize("drop_after", [2, 12])
async def test_a_stream_the_provider_breaks_mid_answer_is_charged_what_it_served(
    server: FakeOpenAI, make_model: Any, real_agent: Any, drop_after: int,
) -> None:
    """Red team (real client): the provider cut the connection after some
    chunks (no last chunk, no usage); the call counted as failed and was
    charged $0, though the provider served (and bills) the request and what
    streamed. It is charged as a stream the caller dropped: its request and
    4 characters a token of what streamed; the run ends ``model_error``."""
    answer = "The order A-1 has been cancelled and refunded in full. " * 4
    server.plan(Reply(text=answer, drop_after=drop_after))
    cost = CostPolicy(cap_usd=5.0, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(cost=cost), make_model(server), [])
    final, _ = await outcome(h, agent)
    report = h.last_report(agent)
    assert len(server.requests) == 1
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert final is None or "refunded in full" not in (final.get_text_content() or "")
    assert report.input_tokens > 100  # the request, estimated (no usage ever came)
    assert report.spent_usd == pytest.approx((report.input_tokens * 2.0 + report.output_tokens * 8.0) / 1e6)
    streamed_chars = len(answer) // max(2, len(answer) // 4) * (drop_after - 2)
    assert report.output_tokens >= streamed_chars // 4

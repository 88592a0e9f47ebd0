"""Red team, round 52, AgentScope's real ``OpenAIChatModel`` against the
local server: a secret across a block AgentScope ends and reopens (parallel
calls' argument pieces taking turns, a thinking delta amid the text), and a
usage count too large to price."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import (
    ModelCallEndEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
)
from scripted import make_agent, run
from server import Reply

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from agentscope_harness.stores import MemoryStore

U42 = Principal(user_id="u-42")
KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
EXACT = "tenant-db-pass-9f8e7d6c"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): The query.
    """
    return "nothing"


def _harness(**kw: Any) -> Harness:
    return Harness(HarnessConfig(secret_values=[EXACT], **kw), load_entry_points=False)


async def test_a_secret_in_parallel_calls_taking_turns_is_redacted_in_the_stream(
    server: Any, make_model: Any,
) -> None:
    """README 'Secrets'. The server sends two calls' argument pieces in turn
    (as providers do); AgentScope ends and reopens each call at every turn,
    and each piece was filtered alone: the key and the exact value reached
    the user's stream whole (with one call, they were redacted)."""
    server.plan(Reply(tool_calls=[("lookup", {"q": f"key {KEY} and {EXACT}"}), ("lookup", {"q": "weather"})]),
                Reply(text="ok"))
    h = _harness()
    agent = make_agent(make_model(server), [lookup], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, _ = await run(agent, "look")
    shown: dict[str, str] = {}
    for e in events:
        if isinstance(e, ToolCallDeltaEvent):
            shown[e.tool_call_id] = shown.get(e.tool_call_id, "") + e.delta
    assert len(shown) == 2
    streamed = json.dumps(shown)
    assert KEY[:12] not in streamed and EXACT[:8] not in streamed
    assert sorted(json.loads(a)["q"] for a in shown.values()) == [
        "key [redacted:openai_key] and [redacted:secret_value]", "weather"]
    ends = [i for i, e in enumerate(events) if isinstance(e, ToolCallEndEvent)]
    model_end = next(i for i, e in enumerate(events) if isinstance(e, ModelCallEndEvent))
    assert {events[i].tool_call_id for i in ends} == set(shown) and all(i < model_end for i in ends)


async def test_a_thinking_delta_at_every_position_of_a_key_does_not_split_it(server: Any, make_model: Any) -> None:
    """The same, the break at every position of the key: the user's
    stream never shows more of it than its redaction."""
    for at in range(len(KEY) + 1):
        server.plan(Reply(deltas=[{"content": "Key: " + KEY[:at]}, {"reasoning_content": "hm"},
                                  {"content": KEY[at:] + "."}]))
        h = _harness()
        agent = make_agent(make_model(server), [], middlewares=h.middlewares())
        with h.acting_for(U42):
            events, _ = await run(agent, "my key?")
        text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
        assert text == "Key: [redacted:openai_key].", at


@pytest.mark.parametrize("secret", [KEY, EXACT, "password=Hunter2Hunter2Hunter2"])
@pytest.mark.parametrize("at", [1, 9, 15, -3])
async def test_a_thinking_delta_amid_the_text_does_not_split_a_secret(
    server: Any, make_model: Any, secret: str, at: int,
) -> None:
    """README 'Secrets'. Text, a thinking delta, then the rest of the text:
    AgentScope ends the text block and opens another, and the held-back
    opening of the secret was sent at the first block's end. The user's
    stream shows one text block, redacted as the final message is."""
    server.plan(Reply(deltas=[{"content": "Your key: " + secret[:at]}, {"reasoning_content": "hmm"},
                              {"content": secret[at:] + " (keep it safe)"}]))
    h = _harness()
    agent = make_agent(make_model(server), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, final = await run(agent, "my key?")
    text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert secret not in text and secret[: max(at, 8)] not in text
    assert text == final.get_text_content() and text.startswith("Your key: [redacted:")
    starts = [e.block_id for e in events if isinstance(e, TextBlockStartEvent)]
    assert len(starts) == 1
    assert {e.block_id for e in events if isinstance(e, (TextBlockDeltaEvent, TextBlockEndEvent))} == set(starts)
    assert "".join(e.delta for e in events if isinstance(e, ThinkingBlockDeltaEvent)) == "hmm"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
@pytest.mark.parametrize("field", ["prompt_tokens", "completion_tokens"])
async def test_a_usage_count_too_large_to_price_is_charged_the_estimate(
    server: Any, make_model: Any, stream: bool, field: str,
) -> None:
    """README 'No usage, no free ride'. A proxy reported ``10**400`` tokens:
    the price overflowed, the reply raised ``OverflowError``, the run was
    reported ``failed``, and the day's spend stayed $0 though the provider
    answered."""
    usage: dict[str, Any] = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    usage[field] = 10**400
    server.plan(Reply(text="The answer is 42.", usage=usage))
    store = MemoryStore()
    h = _harness(cost=CostPolicy(cap_usd=1.0, prices={"gpt-test": (1.0, 1.0)}, daily_quota_usd=5.0), store=store)
    agent = make_agent(make_model(server, stream=stream), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "answer?")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer is 42."
    assert report.terminal_state is TerminalState.COMPLETED and 0 < report.spent_usd < 0.01
    assert await store.get_spend(U42.key) == pytest.approx(report.spent_usd)
    assert "usage_estimated" in [d.action for d in report.decisions]


# ------------------------------------------------- round 53, on these fixes


async def submit_answer(answer: str) -> str:
    """Give the user the final answer.

    Args:
        answer (str): The answer.
    """
    return answer


async def test_personal_data_split_at_a_block_break_is_rewritten_in_the_stream(server: Any, make_model: Any) -> None:
    """Round 53, README ``pii`` ("the model's streamed text, thinking and
    tool-call arguments"). The redaction stage holds the last characters
    back, so the personal-data stage behind it held none: each end passed
    in place and the card and the email, split by thinking deltas, were
    streamed whole (the final answer had them rewritten)."""
    server.plan(Reply(deltas=[{"content": "Card 4111 1111 "}, {"reasoning_content": "hm"},
                              {"content": "1111 1111; mail "}, {"reasoning_content": "ok"},
                              {"content": "john.doe@"}, {"reasoning_content": "ok"},
                              {"content": "example.com thanks"}]))
    h = Harness(HarnessConfig(pii={"email": "redact", "card": "redact"}), load_entry_points=False)
    agent = make_agent(make_model(server), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, final = await run(agent, "contact?")
    text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert text == final.get_text_content() == "Card [pii:payment_card]; mail [pii:email] thanks"


async def test_personal_data_in_a_finishing_tools_arguments_taking_turns_is_rewritten(
    server: Any, make_model: Any,
) -> None:
    """Round 53: the finishing tool's argument pieces take turns with a
    parallel call's; the email was streamed whole."""
    server.plan(Reply(tool_calls=[("submit_answer", {"answer": "Write to john.doe@example.com"}),
                                  ("lookup", {"q": "weather today"})]), Reply(text="done"))
    h = Harness(HarnessConfig(pii={"email": "redact"}, tools={"submit_answer": ToolPolicy(role="finish")}),
                load_entry_points=False)
    agent = make_agent(make_model(server), [submit_answer, lookup], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, final = await run(agent, "contact?")
    shown = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    assert "john.doe" not in shown and "[pii:email]" in shown
    assert final.get_text_content() == "Write to [pii:email]"


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_a_usage_that_leaves_out_the_answers_tokens_is_estimated(
    server: Any, make_model: Any, stream: bool,
) -> None:
    """Round 53: ``"completion_tokens": null`` passed as billable; AgentScope's
    own event refused it and the reply raised, reported ``failed``."""
    server.plan(Reply(text="The answer is 42.",
                      usage={"prompt_tokens": 100, "completion_tokens": None, "total_tokens": 100}))
    h = _harness(cost=CostPolicy(cap_usd=1.0, prices={"gpt-test": (1.0, 1.0)}))
    agent = make_agent(make_model(server, stream=stream), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "answer?")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer is 42."
    assert report.terminal_state is TerminalState.COMPLETED and report.spent_usd > 0


# ------------------------------------------------- round 54, on these fixes


async def test_personal_data_in_an_ordinary_calls_arguments_is_rewritten_in_the_stream(
    server: Any, make_model: Any,
) -> None:
    """Round 54, README ``pii``: "the model's streamed text, thinking and
    tool-call arguments". Only a finishing tool's arguments were rewritten:
    ``lookup``'s streamed the email, card and phone whole."""
    server.plan(Reply(tool_calls=[("lookup", {"q": "refund jane.doe@example.org card 4111 1111 1111 1111"})]),
                Reply(text="done"))
    h = Harness(HarnessConfig(pii={"email": "redact", "card": "redact"}), load_entry_points=False)
    agent = make_agent(make_model(server), [lookup], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, _ = await run(agent, "refund")
    shown = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    assert json.loads(shown) == {"q": "refund [pii:email] card [pii:payment_card]"}


async def test_a_stream_the_provider_breaks_ends_every_block_it_showed_open(server: Any, make_model: Any) -> None:
    """Round 54: text, thinking, text, then the connection drops; the
    harness answers with ``model_error_text``. The first text block's end
    stayed held and the thinking block never ended; the key's opening the
    break left unfinished is never sent."""
    server.plan(Reply(deltas=[{"content": "Key: " + KEY[:6]}, {"reasoning_content": "hmm"},
                              {"content": KEY[6:12]}, {"content": KEY[12:]}], drop_after=3))
    h = _harness(model_error_text="Sorry, the model failed.")
    agent = make_agent(make_model(server), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, final = await run(agent, "key?")
    opened: set[str] = set()
    for e in events:
        if isinstance(e, (TextBlockStartEvent, ThinkingBlockStartEvent)):
            opened.add(e.block_id)
        elif isinstance(e, (TextBlockEndEvent, ThinkingBlockEndEvent)):
            opened.discard(e.block_id)
    assert opened == set() and final.get_text_content() == "Sorry, the model failed."
    text = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert KEY[:6] not in text and "sk-" not in text


async def test_a_broken_stream_ends_no_block_the_user_never_saw(server: Any, make_model: Any) -> None:
    """Round 55: with a finishing tool, the interim text is held back; the
    break sent an end for that text block, whose start was never shown."""
    server.plan(Reply(deltas=[{"content": "Working on it "}, {"reasoning_content": "hmm"},
                              {"content": "still"}, {"content": " more"}], drop_after=3))
    h = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")},
                              model_error_text="Sorry, the model failed."), load_entry_points=False)
    agent = make_agent(make_model(server), [submit_answer], middlewares=h.middlewares())
    with h.acting_for(U42):
        events, _ = await run(agent, "go")
    started: set[str] = set()
    for e in events:
        if isinstance(e, (TextBlockStartEvent, ThinkingBlockStartEvent)):
            started.add(e.block_id)
        elif isinstance(e, (TextBlockEndEvent, ThinkingBlockEndEvent)):
            assert e.block_id in started, "an end for a block never shown"
            started.discard(e.block_id)
    assert started == set()

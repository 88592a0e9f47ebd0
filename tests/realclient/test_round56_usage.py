"""Red team, round 56, AgentScope's real ``OpenAIChatModel`` against the
local server: a usage whose output count is left out or zero (a proxy that
reports usage on the first chunk only). The output was free (a run spent
4x its cap and its report said 0 output tokens), or the provider's own
input count was replaced by a smaller estimate; round 57: the same in
AgentScope's compression call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted import make_agent, run
from server import SUMMARY, Reply, _page

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Principal, TerminalState

U42 = Principal(user_id="u-42")
ANSWER = "The kettle ships on Monday. " * 100  # 2,800 characters: ~700 tokens at 4 a token
PRICES = {"gpt-test": (1.0, 10.0)}


def _harness() -> Harness:
    return Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices=PRICES)), load_entry_points=False)


async def _answered(server: Any, make_model: Any, usage: dict[str, Any], stream: bool) -> Any:
    server.plan(Reply(text=ANSWER, usage=usage))
    h = _harness()
    agent = make_agent(make_model(server, stream=stream), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "when does it ship?")
    assert final.get_text_content() == ANSWER
    return h.last_report(agent)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 1000, "completion_tokens": 0, "total_tokens": 1000},
    {"prompt_tokens": 1000, "completion_tokens": None, "total_tokens": 1000},
    {"prompt_tokens": 1000},
])
async def test_an_output_left_out_of_the_usage_is_estimated_and_the_input_kept(
    server: Any, make_model: Any, usage: dict[str, Any], stream: bool,
) -> None:
    """README 'No usage, no free ride': never a free call. The provider's
    input count stands; the output is 4 characters a token of the answer."""
    report = await _answered(server, make_model, usage, stream)
    assert report.terminal_state is TerminalState.COMPLETED
    assert (report.input_tokens, report.output_tokens) == (1000, len(ANSWER) // 4)
    assert report.spent_usd == pytest.approx((1000 * 1.0 + len(ANSWER) // 4 * 10.0) / 1e6)
    assert [d.action for d in report.decisions].count("usage_estimated") == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_a_full_usage_is_charged_as_reported(server: Any, make_model: Any, stream: bool) -> None:
    """The provider's counts stand, however few tokens its answer took."""
    report = await _answered(server, make_model, {"prompt_tokens": 1000, "completion_tokens": 20}, stream)
    assert (report.input_tokens, report.output_tokens) == (1000, 20)
    assert "usage_estimated" not in [d.action for d in report.decisions]


# ------------------------------------------- round 57: AgentScope's compression call

BIG_SUMMARY = dict.fromkeys(SUMMARY, "x" * 4000)  # about 5,000 output tokens of summary


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 6000, "completion_tokens": 0, "total_tokens": 6000},
    {"prompt_tokens": 6000, "completion_tokens": None, "total_tokens": 6000},
    {"prompt_tokens": 6000},
])
async def test_a_compressions_output_left_out_of_its_usage_is_estimated(
    server: Any, make_model: Any, usage: dict[str, Any], stream: bool,
) -> None:
    """The compression's summary (20,000 characters) was charged 0 output
    tokens; with a ``null`` count AgentScope's own compression failed the
    reply. Its input stands, its output is estimated."""
    server.plan(Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
                Reply(tool_calls=[("generate_structured_output", BIG_SUMMARY)], usage=usage),
                Reply(text="Here is the page summary.", usage=(1000, 10)))
    h = _harness()
    model = make_model(server, stream=stream, context_size=4000)
    agent = make_agent(model, [_page], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "summarise http://x")
    report = h.last_report(agent)
    assert final.get_text_content() == "Here is the page summary."
    assert report.input_tokens == 1000 + 6000 + 1000
    assert report.output_tokens >= 10 + len(json.dumps(BIG_SUMMARY)) // 4 + 10
    assert [d.action for d in report.decisions].count("usage_estimated") == 1


async def test_a_compressions_whole_usage_is_charged_as_reported(server: Any, make_model: Any) -> None:
    server.plan(Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
                Reply(tool_calls=[("generate_structured_output", BIG_SUMMARY)], usage=(6000, 5000)),
                Reply(text="Here is the page summary.", usage=(1000, 10)))
    h = _harness()
    agent = make_agent(make_model(server, context_size=4000), [_page], middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "summarise http://x")
    report = h.last_report(agent)
    assert (report.input_tokens, report.output_tokens) == (8000, 5020)
    assert "usage_estimated" not in [d.action for d in report.decisions]

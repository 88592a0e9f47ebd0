"""Red team, round 91 (a middleware's calls, AgentScope's real clients). Finding: a side call on AgentScope's real ``AnthropicChatModel`` (streamed,
Anthropic's SSE over a mock transport) stopped mid-answer (the run's deadline
cut it, or the tool's own timeout cancelled it) after 40,000 characters of
tool-call arguments streamed is charged 1 output token. Anthropic's
``message_start`` carries ``usage`` (input, ``output_tokens: 1``): the
harness's ``_usage_of_stream`` keeps it as "reported" and ``_charged`` bills
it as whole, so what streamed is never estimated. The run's own call cut the
same way (control) is charged its request and what streamed."""

import asyncio

import pytest
from agentscope.message import UserMsg
from anthropic_mock import MockAnthropic, tool_stream
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "claude-side": (1.0, 15.0)}
ARGS = '{"ids": ["' + "x" * 40_000 + '"]}'  # 40k characters: ~10k output tokens at 4 characters a token


@pytest.mark.parametrize("cut", ["tool_timeout", "run_deadline"])
async def test_a_side_stream_cut_mid_answer_is_charged_what_streamed(cut: str) -> None:
    main = FakeOpenAI()
    await main.start()
    mock = MockAnthropic()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        mock.script.append(tool_stream(ARGS, 1000, 10_000, stall=True))  # streams the args, then hangs
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, deadline_s=1.5 if cut == "run_deadline" else 30,
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        side = mock.model()

        async def lookup(q: str) -> str:
            """Look something up, reranked.

            Args:
                q (str): The query.
            """
            try:
                async with asyncio.timeout(1.0 if cut == "tool_timeout" else 60):
                    res = await side.generate_structured_output([UserMsg("user", "rank")], structured_model=Ids)
                return str(res.content)[:40]
            except TimeoutError:
                return "reranker too slow"
            except Exception as exc:
                return f"not reranked: {exc}"

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        report = h.last_report(agent)
        got = (report.output_tokens, report.spent_usd, await store.get_spend(ALICE.key))
        assert len(mock.requests) == 1
        # README: "a call stopped before its last chunk, cut, cancelled, ... is charged its request and
        # what streamed, estimated at 4 characters a token"
        assert report.output_tokens >= 8_000, got  # ~10k streamed, at most the model's 8,192 max_tokens
    finally:
        await main.close()


async def test_control_the_runs_own_anthropic_stream_cut_mid_answer_is_charged_what_streamed() -> None:
    mock = MockAnthropic()
    mock.script.append(tool_stream(ARGS, 1000, 10_000, stall=True))
    h = Harness(HarnessConfig(store=MemoryStore(), deadline_s=1.5,
                              cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                load_entry_points=False, environ={})
    agent = make_agent(mock.model(), [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert report.output_tokens >= 8_000, (report.output_tokens, report.reason)

"""Red team, round 92, what held (charging streamed and timed-out calls). Held? A retry after a timed-out attempt: each request charged once."""
import pytest
from agentscope.agent import ModelConfig
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}
BIG = "lorem ipsum " * 33_000  # ~99k tokens


@pytest.mark.parametrize("how", ["stall_after_0", "stall_after_2", "delay"])
@pytest.mark.parametrize("stream", [False, True])
async def test_side_retry_after_timeout(how, stream) -> None:
    if how.startswith("stall") and not stream:
        pytest.skip("streams only")
    main, side = FakeOpenAI(), FakeOpenAI()
    await main.start()
    await side.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        kw = {"delay_s": 5} if how == "delay" else {"stall_after": int(how[-1])}
        side.plan(Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], **kw),
                  Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], usage=(50_000, 10)))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        log = []
        tool = lookup_tool(model(side, "gpt-side", stream=stream, timeout_s=0.5, max_retries=1), payload=BIG, log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        side_in = r.input_tokens - 200
        assert len(side.requests) == 2
        est = len(BIG) // 4
        assert 50_000 + 0.9 * est <= side_in <= 50_000 + 1.2 * est, (side_in, log)
    finally:
        await main.close()
        await side.close()


@pytest.mark.parametrize("how", ["delay"])  # a stream that fails is not retried by AgentScope
@pytest.mark.parametrize("stream", [False, True])
async def test_main_retry_after_timeout(how, stream) -> None:
    if how.startswith("stall") and not stream:
        pytest.skip("streams only")
    main = FakeOpenAI()
    await main.start()
    try:
        kw = {"delay_s": 5} if how == "delay" else {"stall_after": 0}
        main.plan(Reply(text="an answer", **kw), Reply(text="an answer", usage=(50_000, 10)))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(main, "gpt-main", stream=stream, timeout_s=0.5), [], h.middlewares(),
                           model_config=ModelConfig(max_retries=1))
        with h.acting_for(ALICE):
            await run(agent, BIG)
        r = h.last_report(agent)
        assert len(main.requests) == 2
        est = len(BIG) // 4
        assert 50_000 + 0.9 * est <= r.input_tokens <= 50_000 + 1.2 * est, (r.input_tokens, r.reason, r.model_calls)
    finally:
        await main.close()

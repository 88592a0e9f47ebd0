"""Red team, round 92, what held (charging streamed and timed-out calls). Held? Usage in the final chunk after a pause shorter than the client's timeout."""
from scripted import ALICE, make_agent, run
from side_kit import model
from sse_kit import SSE, chunk
from test_round92_f2_usage_then_break import SIDE_ANSWER, USAGE

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 10.0), "gpt-side": (1.0, 10.0)}
ANSWER = [chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer "}),
          chunk({"content": "is forty-two."}), chunk({}, "stop"), ("sleep", 0.4), chunk(usage=USAGE)]


async def test_main() -> None:
    srv = SSE()
    await srv.start()
    try:
        srv.script.append((ANSWER, "done"))
        h = Harness(HarnessConfig(store=MemoryStore(), deadline_s=30,
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(srv, "gpt-main", stream=True, timeout_s=0.5), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "q")
        r = h.last_report(agent)
        assert (r.input_tokens, r.output_tokens) == (1000, 20_000), (r.input_tokens, r.output_tokens)
    finally:
        await srv.close()


async def test_side() -> None:
    from server import FakeOpenAI, Reply
    from side_kit import lookup_tool
    main, srv = FakeOpenAI(), SSE()
    await main.start()
    await srv.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        srv.script.append((SIDE_ANSWER[:-1] + [("sleep", 0.4), SIDE_ANSWER[-1]], "done"))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        tool = lookup_tool(model(srv, "gpt-side", stream=True, timeout_s=0.5))
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        assert (r.input_tokens - 200, r.output_tokens - 20) == (1000, 20_000)
    finally:
        await main.close()
        await srv.close()

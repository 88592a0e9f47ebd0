"""Red team, round 92 (charging streamed and timed-out calls). A stream whose final chunk (the usage chunk) arrived whole, then broke before
``[DONE]``: the provider's reported usage is dropped for an estimate of what streamed."""
import pytest
from scripted import ALICE, make_agent, run
from side_kit import model
from sse_kit import SSE, chunk

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 10.0)}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 20_000, "total_tokens": 21_000,
         "completion_tokens_details": {"reasoning_tokens": 19_980}}  # a reasoning model: thinking not streamed
ANSWER = [chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer "}),
          chunk({"content": "is forty-two."}), chunk({}, "stop"), chunk(usage=USAGE)]


@pytest.mark.parametrize("ending", ["done", "eof", "abort", "stall"])
async def test_the_final_usage_chunk_is_charged_as_reported(ending: str) -> None:
    srv = SSE()
    await srv.start()
    try:
        srv.script.append((ANSWER, ending))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(srv, "gpt-main", stream=True, timeout_s=0.5), [], h.middlewares())
        with h.acting_for(ALICE):
            _, final = await run(agent, "what is the answer?")
        r = h.last_report(agent)
        spent_today = await store.get_spend(ALICE.key)
        assert len(srv.requests) == 1 and srv.sent[0][-1].get("usage") == USAGE  # the usage chunk went out whole
        # README ("What a call is charged"): "The provider's usage at `prices`"
        assert r.output_tokens >= 20_000 and spent_today >= 0.2, (
            ending, r.input_tokens, r.output_tokens, r.spent_usd, spent_today, r.reason,
            [d.detail for d in r.decisions if d.action == "usage_estimated"])
    finally:
        await srv.close()


SIDE_PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 10.0)}
ARGS = '{"ids": ["c1", "c2"]}'
SIDE_ANSWER = [chunk({"role": "assistant", "content": ""}, model="gpt-side"),
               chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "generate_structured_output", "arguments": ""}}]},
                     model="gpt-side"),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": ARGS}}]}, model="gpt-side"),
               chunk({}, "tool_calls", model="gpt-side"), chunk(usage=USAGE, model="gpt-side")]


@pytest.mark.parametrize("ending", ["done", "abort", "stall"])
async def test_a_side_streams_final_usage_chunk_is_charged_as_reported(ending: str) -> None:
    from server import FakeOpenAI, Reply
    from side_kit import lookup_tool
    main, srv = FakeOpenAI(), SSE()
    await main.start()
    await srv.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        srv.script.append((SIDE_ANSWER, ending))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=SIDE_PRICES)),
                    load_entry_points=False, environ={})
        log: list = []
        tool = lookup_tool(model(srv, "gpt-side", stream=True, timeout_s=0.5), log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        assert len(srv.requests) == 1 and srv.sent[0][-1].get("usage") == USAGE
        side_out = r.output_tokens - 20  # the two main calls reported 10 each
        assert side_out >= 20_000, (ending, side_out, r.spent_usd, repr(log[0])[:80],
                                    [d.detail for d in r.decisions if d.action == "usage_estimated"])
    finally:
        await main.close()
        await srv.close()

"""Red team, round 91 (a middleware's calls, AgentScope's real clients). Finding: a streamed call whose client timeout fires after the provider
accepted the request (HTTP 200, SSE headers sent) but before its first chunk
(a long prompt's prefill, a reasoning model thinking) is charged $0: the
openai client raises ``APITimeoutError`` while the stream is read, which
``_usage_of_stream`` (a side call) and ``_counted`` (the run's own call) take
for a stream "broken before its first chunk" (served nothing). The same
timeout before the headers (non-streamed) is charged the request. Real
``OpenAIChatModel``, a 100k-token request at $1/M ($0.10)."""

import pytest
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}
BIG = "lorem ipsum " * 33_000  # ~100k tokens by characters / 4


@pytest.mark.parametrize("stream", [False, True], ids=["control_not_streamed", "streamed"])
async def test_a_side_call_timed_out_after_its_request_went_out_is_charged_it(stream: bool) -> None:
    main, side = FakeOpenAI(), FakeOpenAI()
    await main.start()
    await side.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        # streamed: headers at once, then no chunk; not streamed: no answer at all
        side.plan(Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})],
                        **({"stall_after": 0} if stream else {"delay_s": 5})))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        log: list = []
        tool = lookup_tool(model(side, "gpt-side", stream=stream, timeout_s=0.5), payload=BIG, log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            _, final = await run(agent, "look it up")
        report = h.last_report(agent)
        spent_today = await store.get_spend(ALICE.key)
        assert len(side.requests) == 1 and type(log[0]).__name__ == "APITimeoutError", log
        assert final.get_text_content() == "done"
        got = (report.spent_usd, spent_today, report.input_tokens)
        # README: "an attempt the client's own timeout cut after its request went out is charged its
        # request, estimated, as a call cut at the deadline is: the provider may still bill it"
        assert report.spent_usd >= 0.09 and spent_today >= 0.09, got
    finally:
        await main.close()
        await side.close()


@pytest.mark.parametrize("stream", [False, True], ids=["control_not_streamed", "streamed"])
async def test_the_runs_own_call_timed_out_after_its_request_went_out_is_charged_it(stream: bool) -> None:
    main = FakeOpenAI()
    await main.start()
    try:
        main.plan(Reply(text="an answer", **({"stall_after": 0} if stream else {"delay_s": 5})))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(main, "gpt-main", stream=stream, timeout_s=0.5), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, BIG)
        report = h.last_report(agent)
        spent_today = await store.get_spend(ALICE.key)
        assert len(main.requests) == 1
        assert report.spent_usd >= 0.09 and spent_today >= 0.09, (report.spent_usd, spent_today, report.reason)
    finally:
        await main.close()

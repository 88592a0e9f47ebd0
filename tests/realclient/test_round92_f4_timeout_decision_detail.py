"""Red team, round 92 (charging streamed and timed-out calls). The ``usage_estimated`` decision of a run whose only estimate is a timed-out
attempt: the run's own non-streamed call says "an attempt timed out after its
request went out"; the same timeout on a side call (or a streamed one) says
"the provider reported no usage (or a negative count)" / "stopped before its
answer ended": the provider never answered at all."""
import pytest
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.model_guard import _ESTIMATED
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}


@pytest.mark.parametrize("stream", [False, True], ids=["side_not_streamed", "side_streamed"])
async def test_a_side_calls_timeout_is_reported_as_one(stream: bool) -> None:
    main, side = FakeOpenAI(), FakeOpenAI()
    await main.start()
    await side.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        side.plan(Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})],
                        **({"stall_after": 0} if stream else {"delay_s": 5})))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        tool = lookup_tool(model(side, "gpt-side", stream=stream, timeout_s=0.5))
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        details = [d.detail for d in r.decisions if d.action == "usage_estimated"]
        assert details == [_ESTIMATED["unanswered"]], details
    finally:
        await main.close()
        await side.close()


@pytest.mark.parametrize("stream", [False, True], ids=["control_main_not_streamed", "main_streamed"])
async def test_the_runs_own_timeout_is_reported_as_one(stream: bool) -> None:
    main = FakeOpenAI()
    await main.start()
    try:
        main.plan(Reply(text="an answer", **({"stall_after": 0} if stream else {"delay_s": 5})))
        h = Harness(HarnessConfig(store=MemoryStore(), model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(main, "gpt-main", stream=stream, timeout_s=0.5), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "hi")
        r = h.last_report(agent)
        details = [d.detail for d in r.decisions if d.action == "usage_estimated"]
        assert details == [_ESTIMATED["unanswered"]], details
    finally:
        await main.close()

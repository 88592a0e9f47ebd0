"""Red team, round 91 (a middleware's calls, AgentScope's real clients). Finding: a side call's attempts (AgentScope's structured-output strategies:
``forced`` answered with text, then ``auto``) are summed into one usage
before pricing. A proxy that reports prompt-cache reads beside the input
(the README's case: "charged both") answers the second attempt, the same
prompt now cached, with ``prompt_tokens=100, cached_tokens=100000``. Priced
one by one: $0.10 + $0.0101. Summed: input 100,100 of which 100,000 cached,
so the first attempt's 100,000 fresh tokens are priced at the cached rate:
$0.0101 in all. Two separate side calls with the same usages (control) are
charged $0.1101."""

import pytest
from agentscope.message import UserMsg
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0, 0.1)}
FRESH = {"prompt_tokens": 100_000, "completion_tokens": 5, "total_tokens": 100_005}
CACHED_BESIDE = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105,
                 "prompt_tokens_details": {"cached_tokens": 100_000}}


@pytest.mark.parametrize("one_call", [False, True], ids=["control_two_calls", "one_call_two_attempts"])
async def test_each_attempt_is_priced_as_reported(one_call: bool) -> None:
    main, side = FakeOpenAI(), FakeOpenAI()
    await main.start()
    await side.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        if one_call:  # forced: text (no structured output), auto: the call, its prompt now cached
            side.plan(Reply(text="c1 first", usage=FRESH),
                      Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], usage=CACHED_BESIDE))
        else:
            side.plan(Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], usage=FRESH),
                      Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], usage=CACHED_BESIDE))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        sm = model(side, "gpt-side", stream=False)

        async def lookup(q: str) -> str:
            """Look something up, reranked.

            Args:
                q (str): The query.
            """
            for _ in range(1 if one_call else 2):
                res = await sm.generate_structured_output([UserMsg("user", f"rank {q}")], structured_model=Ids)
            return str(res.content)

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        report = h.last_report(agent)
        assert len(side.requests) == 2
        side_usd = report.spent_usd - 2 * 110e-6
        # README: "a usage reporting more cached tokens than input (a proxy that reports them beside
        # the input) is charged both, never the cached part as nothing"; each attempt is charged
        assert side_usd >= 0.11, (round(side_usd, 6), report.input_tokens, await store.get_spend(ALICE.key))
    finally:
        await main.close()
        await side.close()

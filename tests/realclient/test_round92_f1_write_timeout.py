"""Red team, round 92 (charging streamed and timed-out calls). A request the provider never read (the client's write timeout: the body did
not go out whole) is charged as a request that went out."""
import asyncio

import pytest
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}
BIG = "lorem ipsum " * 700_000  # 8.4 MB: more than the sockets buffer, ~2.1M tokens by characters / 4


class Deaf:
    """Accepts connections and never reads a byte of them (an overloaded proxy)."""

    def __init__(self) -> None:
        self.connections = 0
        self.bytes_read = 0
        self.base_url = ""

    async def start(self) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await asyncio.sleep(3600)
        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def close(self) -> None:
        self.server.close()


@pytest.mark.parametrize("stream", [False, True], ids=["not_streamed", "streamed"])
async def test_the_runs_own_call_never_sent_whole_is_charged_nothing(stream: bool) -> None:
    deaf = Deaf()
    await deaf.start()
    try:
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=100, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        agent = make_agent(model(deaf, "gpt-main", stream=stream, timeout_s=0.5, context_size=10**9), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, BIG)
        report = h.last_report(agent)
        spent_today = await store.get_spend(ALICE.key)
        assert deaf.connections == 1 and deaf.bytes_read == 0  # the server read nothing of it
        # README: "an attempt the client's own timeout cut after its request went out is charged its
        # request ...; one that timed out connecting sent nothing and is charged nothing"
        assert report.spent_usd == 0 and spent_today == 0, (report.spent_usd, spent_today, report.input_tokens,
                                                            [d.detail for d in report.decisions
                                                             if d.action == "usage_estimated"])
    finally:
        await deaf.close()


async def test_a_side_call_never_sent_whole_is_charged_nothing() -> None:
    main, deaf = FakeOpenAI(), Deaf()
    await main.start()
    await deaf.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=100, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        log: list = []
        tool = lookup_tool(model(deaf, "gpt-side", stream=False, timeout_s=0.5), payload=BIG, log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        report = h.last_report(agent)
        spent_today = await store.get_spend(ALICE.key)
        assert deaf.connections == 1 and type(log[0]).__name__ == "APITimeoutError", log
        side_usd = report.spent_usd - 2 * 110e-6
        assert side_usd < 1e-6, (round(side_usd, 4), spent_today, repr(log[0].__cause__))
    finally:
        await main.close()
        await deaf.close()

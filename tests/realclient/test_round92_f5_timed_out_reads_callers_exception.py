"""Red team, round 92 (charging streamed and timed-out calls). ``_timed_out`` walks ``__context__``, which Python sets to whatever exception the
*caller* was handling when the call was made: a side call made in an ``except``
block (a tool's fallback after its own timeout, or after a first model call that
failed) is judged by that earlier exception, not by its own failure."""
import asyncio
import socket

from agentscope.message import UserMsg
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply, fail
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}
BIG = "lorem ipsum " * 33_000  # ~99k tokens by characters / 4: $0.099 a request
MAIN_USD = 2 * 110e-6


async def _drive(side_server, tool_body) -> tuple:
    main = FakeOpenAI()
    await main.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        log: list = []

        async def lookup(q: str) -> str:
            """Look something up, reranked.

            Args:
                q (str): The query.
            """
            return await tool_body(log)

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        return r, await store.get_spend(ALICE.key), log
    finally:
        await main.close()


async def test_a_429_answered_in_an_except_block_is_charged_nothing() -> None:
    """A tool whose own lookup timed out asks the side model instead, in its
    ``except TimeoutError`` block
    the provider answers 429 (nothing served)."""
    side = FakeOpenAI()
    await side.start()
    side.plan(*fail(429))
    sm = model(side, "gpt-side", stream=False, timeout_s=5)

    async def body(log):
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(1)  # the tool's own slow lookup
            return "fetched"
        except TimeoutError:
            try:
                res = await sm.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
                return str(res.content)
            except Exception as exc:
                log.append(exc)
                return f"not reranked: {type(exc).__name__}"
    try:
        r, today, log = await _drive(side, body)
        assert side.statuses == [429] and type(log[0]).__name__ == "RateLimitError", log
        # README (quota rule): "settled with the actual cost (0 if the call failed ...)"
        assert r.spent_usd - MAIN_USD < 1e-9, (round(r.spent_usd - MAIN_USD, 4), today,
                                               [d.detail for d in r.decisions if d.action == "usage_estimated"])
    finally:
        await side.close()


async def test_control_the_same_429_outside_an_except_block_is_charged_nothing() -> None:
    side = FakeOpenAI()
    await side.start()
    side.plan(*fail(429))
    sm = model(side, "gpt-side", stream=False, timeout_s=5)

    async def body(log):
        try:
            res = await sm.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
            return str(res.content)
        except Exception as exc:
            log.append(exc)
            return "not reranked"
    try:
        r, today, log = await _drive(side, body)
        assert side.statuses == [429] and r.spent_usd - MAIN_USD < 1e-9, r.spent_usd
    finally:
        await side.close()


async def test_a_read_timeout_after_a_connect_timeout_is_charged_its_request() -> None:
    """The primary reranker's host does not answer connects (nothing sent); the
    tool falls back, in its ``except`` block, to a second reranker that takes the
    request and times out reading the answer: that request went out."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    held = [srv]
    for _ in range(4):  # fill the accept queue: further connects hang
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        held.append(c)

    class Dead:
        base_url = f"http://127.0.0.1:{port}/v1"

    backup = FakeOpenAI()
    await backup.start()
    backup.plan(Reply(tool_calls=[("generate_structured_output", {"ids": ["c1"]})], delay_s=5))
    primary = model(Dead(), "gpt-side", stream=False, timeout_s=0.3)
    second = model(backup, "gpt-side", stream=False, timeout_s=0.5)

    async def body(log):
        try:
            res = await primary.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
        except Exception as exc:
            log.append(exc)
            try:
                res = await second.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
            except Exception as exc2:
                log.append(exc2)
                return "not reranked"
        return str(res.content)
    try:
        r, today, log = await _drive(backup, body)
        assert len(backup.requests) == 1, backup.requests
        assert [type(e.__cause__).__name__ for e in log] == ["ConnectTimeout", "ReadTimeout"], log
        # README: "an attempt the client's own timeout cut after its request went out is charged its request"
        assert r.spent_usd - MAIN_USD >= 0.09, (round(r.spent_usd - MAIN_USD, 4), today)
    finally:
        await backup.close()
        for s in held:
            s.close()


async def test_agentscopes_own_compression_retry_answered_500_is_charged_nothing(monkeypatch) -> None:
    """No user code: AgentScope's compression retries its summary (oldest context
    dropped) inside its ``except`` block for the first attempt's failure. The
    first attempt timed out reading (its request went out: charged, rightly);
    the retry is answered ``500`` (nothing served), yet charged its request."""
    import json

    from agentscope_harness import model_guard
    estimates: list[int] = []
    real = model_guard.estimate_input_tokens

    def spy(messages, tools):
        estimates.append(real(messages, tools))
        return estimates[-1]
    monkeypatch.setattr(model_guard, "estimate_input_tokens", spy)

    srv = FakeOpenAI()
    await srv.start()
    try:
        srv.plan(Reply(text="x", delay_s=5), *fail(500))  # the summary: timed out, then its retry 500
        h = Harness(HarnessConfig(store=MemoryStore(), model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=100, daily_quota_usd=100,
                                                  prices={"gpt-main": (1.0, 1.0)})),
                    load_entry_points=False, environ={})
        agent = make_agent(model(srv, "gpt-main", stream=False, timeout_s=0.5, context_size=4000), [],
                           h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "lorem ipsum " * 10_000)
        r = h.last_report(agent)
        assert srv.statuses[:2] == [200, 500] and "generate_structured_output" in json.dumps(srv.requests[1])
        summary_timed_out, summary_500 = estimates[0], estimates[1]
        charged = r.input_tokens - 100  # the run's own call reported 100
        # README: charged "an attempt the client's own timeout cut after its request went out";
        # quota rule: "0 if the call failed"
        assert charged == summary_timed_out, (charged, summary_timed_out, summary_500)
    finally:
        await srv.close()

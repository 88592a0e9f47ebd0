"""Red team, round 92, what held (charging streamed and timed-out calls). Held? Nothing sent (refused, DNS, connect timeout, 408, 429): $0."""
import socket

import pytest
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply, fail
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (1.0, 1.0)}
BIG = "lorem ipsum " * 33_000


class Url:
    def __init__(self, url): self.base_url = url


def _full_backlog():
    """A port whose accept queue is full: a connect there hangs (a SYN dropped)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    held = [srv]
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        held.append(c)
    return f"http://127.0.0.1:{port}/v1", held


@pytest.mark.parametrize("how", ["refused", "dns", "connect_timeout", "408", "429"])
@pytest.mark.parametrize("stream", [False, True])
async def test_nothing_sent_is_charged_nothing(how, stream) -> None:
    main = FakeOpenAI()
    await main.start()
    side_srv = None
    held = []
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        if how == "refused":
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            target = Url(f"http://127.0.0.1:{port}/v1")
        elif how == "dns":
            target = Url("http://no-such-host.invalid/v1")
        elif how == "connect_timeout":
            url, held = _full_backlog()
            target = Url(url)
        else:
            side_srv = FakeOpenAI()
            await side_srv.start()
            side_srv.plan(*fail(int(how)))
            target = side_srv
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        log = []
        tool = lookup_tool(model(target, "gpt-side", stream=stream, timeout_s=0.5), payload=BIG, log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        side_usd = r.spent_usd - 2 * 110e-6
        assert abs(side_usd) < 1e-9, (how, side_usd, repr(log[0]), repr(log[0].__cause__))
    finally:
        await main.close()
        if side_srv:
            await side_srv.close()
        for s in held:
            s.close()

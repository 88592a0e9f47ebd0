"""Red team, round 92, what held (charging streamed and timed-out calls). Held? Anthropic cache reads/writes summed over a side call's attempts."""
import json

import httpx2 as httpx
from agentscope.credential import AnthropicCredential
from agentscope.message import UserMsg
from agentscope.model import AnthropicChatModel
from pydantic import SecretStr
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "claude-x": (3.0, 15.0, 0.3)}


def msg(content, usage):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}


async def test_cache_priced_per_attempt() -> None:
    replies = [msg([{"type": "text", "text": "c1"}],
                   {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 100_000,
                    "cache_read_input_tokens": 0}),
               msg([{"type": "tool_use", "id": "t1", "name": "generate_structured_output", "input": {"ids": ["c1"]}}],
                   {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 100_000})]
    seen = []

    async def handle(request):
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=replies.pop(0))

    side = AnthropicChatModel(credential=AnthropicCredential(api_key=SecretStr("k")), model="claude-x", stream=False,
                              max_retries=0, client_kwargs={"http_client": httpx.AsyncClient(
                                  transport=httpx.MockTransport(handle)), "max_retries": 0})
    main = FakeOpenAI()
    await main.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})

        async def lookup(q: str) -> str:
            """Look something up.

            Args:
                q (str): The query.
            """
            res = await side.generate_structured_output([UserMsg("user", "rank")], structured_model=Ids)
            return str(res.content)

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        assert len(seen) == 2
        side_usd = r.spent_usd - 2 * 110e-6
        expected = (100_010 * 3 + 5 * 15) / 1e6 + (10 * 3 + 100_000 * 0.3 + 5 * 15) / 1e6
        assert abs(side_usd - expected) < 1e-6, (side_usd, expected)
    finally:
        await main.close()

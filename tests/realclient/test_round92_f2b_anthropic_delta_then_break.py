"""Red team, round 92 (charging streamed and timed-out calls). Anthropic: ``message_delta`` (the final, cumulative usage) arrived, then the stream
broke before ``message_stop``: the provider's whole count is dropped for an estimate."""
import asyncio
import json

import httpx2 as httpx
import pytest
from agentscope.credential import AnthropicCredential
from agentscope.message import UserMsg
from agentscope.model import AnthropicChatModel
from anthropic_mock import sse
from pydantic import SecretStr
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "claude-x": (3.0, 15.0)}


def answer(tool: bool) -> list[dict]:
    """A thinking model's answer: a short thinking summary (the billed thinking is far
    longer: Claude 4 bills the full thinking, streams a summary), then the text or the
    structured output's call; message_delta carries the final output count, 20,000."""
    ev = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-x",
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1000, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Summary: rank."}},
        {"type": "content_block_stop", "index": 0}]
    if tool:
        ev += [{"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "generate_structured_output", "input": {}}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": '{"ids": ["c1"]}'}}]
    else:
        ev += [{"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
               {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Forty-two."}}]
    ev += [{"type": "content_block_stop", "index": 1},
           {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 20_000}}]
    return ev


class Mock:
    def __init__(self, ending: str) -> None:
        self.ending, self.requests, self.sent = ending, [], []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        events = answer(tool="tools" in self.requests[-1])

        async def body():
            for e, raw in zip(events, sse(events)):
                yield raw
                self.sent.append(e["type"])
                await asyncio.sleep(0.01)
            if self.ending == "stop":
                yield sse([{"type": "message_stop"}])[0]
                self.sent.append("message_stop")
            else:
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    def model(self) -> AnthropicChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return AnthropicChatModel(credential=AnthropicCredential(api_key=SecretStr("sk-ant-test")), model="claude-x",
                                  stream=True, max_retries=0, retry_delay=0.01,
                                  client_kwargs={"http_client": client, "max_retries": 0})


@pytest.mark.parametrize("ending", ["stop", "broken"])
async def test_the_runs_own_call_is_charged_the_final_count(ending: str) -> None:
    mock = Mock(ending)
    h = Harness(HarnessConfig(store=MemoryStore(), model_error_text="the model failed",
                              cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                load_entry_points=False, environ={})
    agent = make_agent(mock.model(), [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    r = h.last_report(agent)
    assert "message_delta" in mock.sent  # the final count went out
    # README ("What a call is charged"): "The provider's usage at `prices`"
    assert r.output_tokens >= 20_000, (ending, r.input_tokens, r.output_tokens, r.spent_usd, r.reason)


@pytest.mark.parametrize("ending", ["stop", "broken"])
async def test_a_side_call_is_charged_the_final_count(ending: str) -> None:
    main, mock = FakeOpenAI(), Mock(ending)
    await main.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        side = mock.model()
        log: list = []

        async def lookup(q: str) -> str:
            """Look something up, reranked.

            Args:
                q (str): The query.
            """
            try:
                res = await side.generate_structured_output([UserMsg("user", "rank")], structured_model=Ids)
                log.append(res)
                return str(res.content)
            except Exception as exc:
                log.append(exc)
                return f"not reranked: {exc}"

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        assert len(mock.requests) == 1 and "message_delta" in mock.sent
        side_out = r.output_tokens - 20
        assert side_out >= 20_000, (ending, side_out, r.spent_usd, repr(log[0])[:80],
                                    [d.detail for d in r.decisions if d.action == "usage_estimated"])
    finally:
        await main.close()

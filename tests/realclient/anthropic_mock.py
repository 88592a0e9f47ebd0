"""AgentScope's real AnthropicChatModel over an httpx MockTransport that plays
Anthropic's SSE (or JSON) answers; every request is counted."""
from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2 as httpx
from agentscope.credential import AnthropicCredential
from agentscope.model import AnthropicChatModel
from pydantic import SecretStr


def sse(events: list[dict]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def tool_stream(args: str, input_tokens: int, output_tokens: int, pieces: int = 8, stall: bool = False,
                cache_read: int = 0) -> list[Any]:
    """A tool_use answer: message_start (usage input, output 1), the args in pieces, then
    (unless ``stall``) message_delta with the final output count and message_stop."""
    step = max(1, len(args) // pieces)
    events: list[Any] = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-side", "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                                                        "cache_read_input_tokens": cache_read}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "generate_structured_output", "input": {}}},
    ]
    events += [{"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": args[i:i + step]}}
               for i in range(0, len(args), step)]
    if stall:
        return [*sse(events), "STALL"]
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": output_tokens}},
               {"type": "message_stop"}]
    return sse(events)


class MockAnthropic:
    def __init__(self) -> None:
        self.script: list[list[Any]] = []
        self.requests: list[dict] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        chunks = self.script.pop(0)

        async def body():
            for c in chunks:
                if c == "STALL":
                    await asyncio.sleep(3600)
                yield c
                await asyncio.sleep(0.01)

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    def model(self, name: str = "claude-side", **kw: Any) -> AnthropicChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        kw.setdefault("retry_delay", 0.01)
        kw.setdefault("max_retries", 0)
        return AnthropicChatModel(credential=AnthropicCredential(api_key=SecretStr("sk-ant-test")), model=name,
                                  stream=True, client_kwargs={"http_client": client, "max_retries": 0}, **kw)

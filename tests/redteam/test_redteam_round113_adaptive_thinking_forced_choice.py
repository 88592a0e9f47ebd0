"""Round 113 (red team on rounds 111-112). Round 111's thinking fix reads only ``parameters.thinking_enable``
(``model_guard._unforced_while_thinking``). AgentScope's AnthropicChatModel
turns thinking on by ``thinking_mode`` too ("the modern control ... takes
precedence over thinking_enable"; ``adaptive`` is "the only mode Claude Opus
4.7 and later accept"): with ``thinking_mode="adaptive"`` (or ``"enabled"``)
and ``thinking_enable`` left False the harness still forces
``tool_choice={"type":"tool","name":"GenerateStructuredOutput"}`` on a thinking
request, Anthropic answers 400 ("Thinking may not be enabled when tool_choice
forces tool use."), and the run fails ``model_error``: the caller gets the
provider's exception instead of the fallback or the output.

README: "On a model with thinking on (its ``parameters.thinking_enable``), a
round the harness narrows to one tool ... is left to the model's choice
(``tool_choice`` ``auto``): providers reject a forced ``tool_choice`` while the
model thinks, and the run would fail as if the provider had."
"""
from __future__ import annotations

import json

import httpx2
import pytest
from agentscope.credential import AnthropicCredential
from agentscope.message import UserMsg
from agentscope.model import AnthropicChatModel
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, Ids, make_agent, search, tool

pytestmark = pytest.mark.asyncio


class Claude:
    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        forced = (body.get("tool_choice") or {}).get("type") in ("tool", "any")
        if forced and (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
            return httpx2.Response(400, json={"type": "error", "error": {
                "type": "invalid_request_error",
                "message": "Thinking may not be enabled when tool_choice forces tool use."}})
        name, args = ("search", {"q": "a"}) if len(self.requests) == 1 else ("GenerateStructuredOutput", {"ids": ["A-1"]})
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
            "stop_sequence": None, "usage": {"input_tokens": 300, "output_tokens": 50},
            "content": [{"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": name, "input": args}]})

    def model(self, mode: str) -> AnthropicChatModel:
        return AnthropicChatModel(
            credential=AnthropicCredential(api_key="k"), model="claude-x", stream=False, max_retries=0,
            parameters=AnthropicChatModel.Parameters(max_tokens=2048, thinking_mode=mode),
            client_kwargs={"http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))})


@pytest.mark.parametrize("mode", ["adaptive", "enabled"])
async def test_a_thinking_mode_models_stopped_structured_reply_does_not_fail(mode: str) -> None:
    claude = Claude()
    h = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    agent = make_agent(claude.model(mode), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        try:
            final = await agent.reply(UserMsg("user", "which orders?"), structured_schema=Ids)
        except Exception as exc:
            final = exc
    report = h.last_report(agent)
    assert not isinstance(final, Exception), f"the caller got {type(final).__name__}: {final}"
    assert report.terminal_state.value != "failed", report.reason
    forced = [r.get("tool_choice") for r in claude.requests if (r.get("tool_choice") or {}).get("type") in ("tool", "any")]
    assert not forced, forced

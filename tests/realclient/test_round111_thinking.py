"""Round 111 (budget). A structured reply on a thinking-mode model (AgentScope's real
AnthropicChatModel, ``thinking_enable=True``): every forced conclusion the
harness makes narrows ``tool_choice`` to ``{"type": "tool", "name":
"GenerateStructuredOutput"}``, which Anthropic rejects while thinking is on
("Thinking may not be enabled when tool_choice forces tool use."; the mock
transport answers so only for that request shape). The run stopped at its
call cap, or merely inside its wrap-up window, ends ``failed`` (``model_error``)
and the caller gets the provider's BadRequestError: no fallback, no output.
AgentScope's own ReplyBudgetControlMiddleware (middleware/_budget.py) avoids
exactly this: "Don't force it unless the agent did: providers reject a forced
tool_choice in thinking mode" (mode auto, tools=[GenerateStructuredOutput]);
bare AgentScope here delivers the output.

README: "A structured reply (structured_schema) that is stopped gets up to two
rounds narrowed to GenerateStructuredOutput instead of a text fallback it
cannot end with ...; when neither gives it (a model that will not, or a
deadline already past), the reply ends with the fallback answer and no
structured output"; "deadline, call cap ... | incomplete (deadline,
max_model_calls ...) | fallback_text"; liveness_watchdog: "Near the deadline
(wrap_up_s): constrain and hint".

Cause: agent_adapter.HarnessAgentAdapter._structured_conclusion and
_conclude_choice set ToolChoice(mode=GenerateStructuredOutput) whatever the
model's thinking mode; ModelGuard.model_failed then overrides the stop with
failed/model_error.
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
    """Anthropic's Messages API as far as this test needs: a forced
    tool_choice with thinking enabled is a 400; otherwise the first request
    searches and every later one gives the structured output."""

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

    def model(self, **thinking: object) -> AnthropicChatModel:
        """AgentScope's model on this API, thinking on: the legacy toggle
        unless ``thinking`` names another control (``thinking_mode=...``)."""
        parameters = thinking or {"thinking_enable": True, "thinking_budget": 1024}
        return AnthropicChatModel(
            credential=AnthropicCredential(api_key="k"), model="claude-x", stream=False, max_retries=0,
            parameters=AnthropicChatModel.Parameters(max_tokens=2048, **parameters),
            client_kwargs={"http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))})


@pytest.mark.parametrize("config, reason", [
    (HarnessConfig(max_model_calls=1), "max_model_calls"),   # stopped at its cap: the narrowed rounds
    (HarnessConfig(deadline_s=30, wrap_up_s=30), None),        # in its wrap-up window: force_conclude
], ids=["stopped-at-cap", "wrap-up"])
async def test_a_forced_conclusion_of_a_thinking_models_structured_reply_does_not_fail_the_run(
    config: HarnessConfig, reason: str | None,
) -> None:
    claude = Claude()
    h = Harness(config, load_entry_points=False)
    agent = make_agent(claude.model(), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        try:
            final = await agent.reply(UserMsg("user", "which orders?"), structured_schema=Ids)
        except Exception as exc:  # what the caller got instead of an answer
            final = exc
    report = h.last_report(agent)
    assert not isinstance(final, Exception), f"the caller got {type(final).__name__}: {final}"
    assert report.terminal_state.value != "failed", report.reason
    if reason is not None:
        assert report.reason == reason
    assert final.structured_output == {"ids": ["A-1"]}
    forced = [r for r in claude.requests if (r.get("tool_choice") or {}).get("type") in ("tool", "any")]
    assert not forced, forced
    assert {t["name"] for t in claude.requests[-1]["tools"]} >= {"search", "GenerateStructuredOutput"}


@pytest.mark.parametrize("mode", ["adaptive", "enabled"])
async def test_a_thinking_mode_models_stopped_structured_reply_does_not_fail(mode: str) -> None:
    """Round 113 (red team on rounds 111-112): the fix read only
    ``parameters.thinking_enable``; AgentScope's ``thinking_mode`` ("the
    modern control ... takes precedence"; ``adaptive`` the only mode recent
    Claude models accept) with ``thinking_enable`` left False still got a
    forced ``tool_choice``, a 400, and the caller the provider's exception."""
    claude = Claude()
    h = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    agent = make_agent(claude.model(thinking_mode=mode), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
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

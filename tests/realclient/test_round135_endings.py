"""Round 135 c (README "What the caller receives", what the report counts): endings a
newcomer meets with AgentScope's real `OpenAIChatModel` that the README now states.

- The provider's `finish_reason` is not read (AgentScope ignores it): an answer cut at
  `length` or by a content filter ends `completed` with what came.
- A stream the provider breaks after a whole answer, before its end, ends `failed`
  (`model_error`), as bare AgentScope raises.
- A model call no wait could let through (a request larger than `tokens_per_min`) ends
  `rate_limited` at once, not after `wait_s`.
"""
from __future__ import annotations

import time

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from side_kit import model
from sse_kit import SSE, chunk, text_answer, usage

from agentscope_harness import Harness, HarnessConfig, Principal, RateLimit, TerminalState

pytestmark = pytest.mark.asyncio

ALICE = Principal(user_id="u-42", tenant="acme")


async def _reply(sse: SSE, config: HarnessConfig) -> tuple[Harness, Agent, str, float]:
    h = Harness(config, load_entry_points=False, environ={})
    agent = Agent(name="shop", system_prompt="You help with orders.", model=model(sse, "gpt-main"),
                  toolkit=h.instrument(Toolkit(tools=[])), middlewares=h.middlewares(),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    started = time.monotonic()
    with h.acting_for(ALICE):
        msg = await agent.reply(UserMsg("user", "is my order paid?"))
    return h, agent, msg.get_text_content() or "", time.monotonic() - started


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_an_answer_cut_by_the_provider_ends_completed_with_what_came(finish: str) -> None:
    sse = await SSE().start()
    cut = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Your order A-1 is pa"}),
           chunk({}, finish), chunk(usage=usage(100, 10))]
    sse.script = [(cut, "done")]
    try:
        h, agent, said, _ = await _reply(sse, HarnessConfig())
    finally:
        await sse.close()
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason, said) == (TerminalState.COMPLETED, "answered", "Your order A-1 is pa")


async def test_a_stream_broken_after_a_whole_answer_ends_failed() -> None:
    sse = await SSE().start()
    sse.script = [(text_answer("Your order A-1 is paid.", u=(100, 10)), "abort")]
    try:
        h, agent, said, _ = await _reply(sse, HarnessConfig(model_error_text="The assistant is unavailable."))
    finally:
        await sse.close()
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason, said) == (
        TerminalState.FAILED, "model_error", "The assistant is unavailable.")


async def test_a_request_no_wait_lets_through_is_rate_limited_at_once() -> None:
    sse = await SSE().start()
    sse.script = [(text_answer("Paid."), "done")]
    limit = RateLimit(scope="principal", tokens_per_min=5, wait_s=30)  # the request alone is larger
    try:
        h, agent, _, took = await _reply(sse, HarnessConfig(deadline_s=20, rate_limits=[limit]))
    finally:
        await sse.close()
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason, len(sse.requests)) == (TerminalState.INCOMPLETE, "rate_limited", 0)
    assert took < 10, f"waited {took:.1f} s for a wait that could not let it through"

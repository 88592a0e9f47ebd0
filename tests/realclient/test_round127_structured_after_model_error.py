"""Round 127 c, real client: a structured reply keeps calling a provider that
failed for good.

README ("What the caller receives"): "the provider fails after its retries
... | `failed` (`model_error`) | `model_error_text` when configured"; the
retries are the ones the user configured (``OpenAIChatModel(max_retries=)``,
counted in ``RunReport.model_calls``). A plain reply to a provider that fails
makes ``max_retries + 1`` requests and ends there.

Attack (AgentScope's real OpenAIChatModel, ``max_retries=2``,
``model_error_text`` set, ``structured_schema`` owed): the provider answers
500 three times (the call failed after its retries), then would answer.

What happens: the run is concluded ``failed`` (``model_error``), and then the
harness treats it as a stopped structured reply and makes its two "narrowed"
rounds anyway, each with AgentScope's full retry loop: up to 3x the requests
the user allowed against a failing provider (9 instead of 3 when it stays
down). When the 4th request answers, the caller receives a valid
``structured_output`` together with the text "model failed" and a report
saying ``failed`` (``model_error``): report and delivery disagree. A run the
provider failed for good should make no further model call (as
``dependency_down`` and the other CALLLESS_ENDS do).
"""
from __future__ import annotations

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from pydantic import BaseModel
from scripted import ALICE
from side_kit import model
from sse_kit import SSE, call_answer

from agentscope_harness import Harness, HarnessConfig, TerminalState

pytestmark = pytest.mark.asyncio
FAILED = "The assistant is unavailable right now."


class Pick(BaseModel):
    product: str
    price_eur: int


async def _reply(srv: SSE, schema: type | None) -> tuple[Msg, object]:
    h = Harness(HarnessConfig(model_error_text=FAILED), load_entry_points=False, environ={})
    m = model(srv, "gpt-main", max_retries=2)
    try:
        agent = Agent(name="shop", system_prompt="You help with orders.", model=m, toolkit=h.instrument(Toolkit()),
                      middlewares=h.middlewares(), injection_config=InjectionConfig(inject_runtime_state=False))
        final = None
        kw = {"structured_schema": schema} if schema is not None else {}
        with h.acting_for(ALICE):
            async for item in agent.reply_stream(UserMsg("user", "pick a mug"), yield_final_msg=True, **kw):
                if isinstance(item, Msg):
                    final = item
        return final, h.last_report(agent)
    finally:
        await m.client.close()


FAIL = ("status", 500)
OUTPUT = (call_answer("GenerateStructuredOutput", {"product": "red mug", "price_eur": 12}), "done")


async def test_control_a_plain_reply_stops_after_its_retries() -> None:
    srv = await SSE().start()
    try:
        srv.script += [FAIL, FAIL, FAIL, (call_answer("x", {}), "done")]
        final, report = await _reply(srv, None)
        assert len(srv.requests) == 3
        assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
        assert final.get_text_content() == FAILED
    finally:
        await srv.close()


async def test_a_structured_reply_makes_no_model_call_after_the_provider_failed_for_good() -> None:
    srv = await SSE().start()
    try:
        srv.script += [FAIL, FAIL, FAIL, OUTPUT]
        final, report = await _reply(srv, Pick)
        detail = (len(srv.requests), [b.get("tool_choice") for b in srv.requests], report.terminal_state,
                  report.reason, report.model_calls, final.structured_output, final.get_text_content())
        assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error"), detail
        # the provider failed after the retries the user allowed: no further request
        assert len(srv.requests) == 3, detail
        # and what the caller got agrees with the report: no output delivered beside "failed"
        assert final.structured_output is None, detail
    finally:
        await srv.close()


async def test_a_structured_reply_to_a_provider_that_stays_down_sends_only_its_retries() -> None:
    srv = await SSE().start()
    try:
        srv.script += [FAIL] * 12
        final, report = await _reply(srv, Pick)
        assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
        assert len(srv.requests) == 3, (len(srv.requests), report.model_calls)
    finally:
        await srv.close()

"""Round 149 a: a client-executed tool's result that carries data (an image) crashes the
resuming reply: AgentScope streams the client's result in the resume reply WITHOUT a
`ToolResultStartEvent` (the start was in the reply that asked), so the data delta is
neither the harness's own piece nor held (`tool_names` has no entry), and falls into the
text path of `ReplyLifecycle.on_item`, which reads `item.delta`:
`AttributeError: 'ToolResultDataDeltaEvent' object has no attribute 'delta'`.

README "Ask a human"/client tools: the reply parked on a `RequireExternalExecutionEvent` is
resumed with the client's `ExternalExecutionResultEvent`; its result is "shaped like any
other result"; README "Transparency": an agent behaves as without the harness. (Round 147,
where data deltas passed the lifecycle untouched: the reply completes.)

Attack: a client tool (`is_external_tool`) answered with `[TextBlock("code ok"),
DataBlock(Base64Source(image/png))]` (a screenshot of the device).
Seen: the resume reply raises AttributeError out of the harness's `on_reply`; the user gets
no answer.
Should: the reply completes ("verified."), the image shown as the model reads it (or left
out), never a crash.
"""
from __future__ import annotations

import pytest
from agentscope.event import ExternalExecutionResultEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, ToolResultBlock, ToolResultState, UserMsg

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, client_tool, make_agent, run, text, until_question

pytestmark = pytest.mark.asyncio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def test_a_client_result_with_an_image_does_not_crash_the_resume() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"})), text("verified.")])
    agent = make_agent(model, [client_tool()], h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "verify 123"))
        call = asked.tool_calls[0]
        result = ToolResultBlock(id=call.id, name=call.name, state=ToolResultState.SUCCESS, output=[
            TextBlock(text="code ok"), DataBlock(id="shot-1", source=Base64Source(data=PNG, media_type="image/png"))])
        _, final = await run(agent, inputs=ExternalExecutionResultEvent(reply_id=asked.reply_id,
                                                                        execution_results=[result]))
    assert final.get_text_content() == "verified."
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")

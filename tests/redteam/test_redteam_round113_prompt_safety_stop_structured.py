"""Round 113 (red team on rounds 111-112). A safety hook at ``on_system_prompt`` that refuses stops the run and
"that run's model call is not made" (README, "Writing a hook"). With a
structured reply (``structured_schema``) the model is called anyway, in a
round narrowed to ``GenerateStructuredOutput``, and its output delivered."""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from tests.scripted import Ids, ScriptedModel, calls, make_agent, search, text, tool

pytestmark = pytest.mark.asyncio


@harness_hook("on_system_prompt", name="compliance_gate", kind="safety")
def compliance_gate(ctx) -> None:
    raise HookRejectSignal("this deployment is not cleared to serve requests", code="policy_refused")


async def test_a_prompt_safety_refusal_makes_no_model_call_for_a_structured_reply() -> None:
    h = Harness(HarnessConfig(), hooks=[compliance_gate], load_entry_points=False)
    model = ScriptedModel([calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))] * 2 + [text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    final = await agent.reply(UserMsg("user", "which ids?"), structured_schema=Ids)
    report = h.last_report(agent)
    assert report.terminal_state.value == "incomplete", (report.terminal_state, report.reason)
    assert model.calls == [], f"{len(model.calls)} model call(s) made after the safety hook refused ({report.reason})"
    assert final.structured_output is None, final.structured_output

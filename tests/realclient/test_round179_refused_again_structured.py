"""Round 179 (scenario s179): a structured reply stopped because the model
kept trying a call refused ``permission_denied`` got no narrowed round.

README ("What the caller receives"): "A structured reply (`structured_schema`)
that is stopped gets up to two rounds narrowed to `GenerateStructuredOutput`
instead of a text fallback it cannot end with"; the ends that leave a run no
model call at all are listed, and a refusal met again is not among them.

Cause: the run that acts for nobody (a parked reply resumed by another
caller) ends ``refused:permission_denied``, and the no-model-call ends were
told apart by their reason alone: a run that met that refusal again, ended
with the same reason, was taken for one acting for nobody. Now acting for
nobody is a fact of the run (``RunState.acts_for_nobody``).
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from conftest import build_model
from pydantic import BaseModel
from scripted import ALICE, RAN, ScriptedModel, calls, make_agent, tool
from server import FakeOpenAI, Reply

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy

pytestmark = pytest.mark.asyncio
OUTPUT_TOOL = "GenerateStructuredOutput"
CONFIG = HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})})


class Verdict(BaseModel):
    answer: str


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(("cancel_order", {"order_id": order_id, "user_id": user_id}))
    return f"order {order_id} cancelled"


async def _structured_reply(model: Any) -> tuple[Msg | None, Any, Harness]:
    """Alice asks to cancel Bob's orders, a structured reply owed."""
    harness = Harness(CONFIG, load_entry_points=False, environ={})
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(cancel_order)])), harness.middlewares())
    final = None
    with harness.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "cancel bob's orders"), yield_final_msg=True,
                                             structured_schema=Verdict):
            if isinstance(item, Msg):
                final = item
    return final, harness.last_report(agent), harness


async def test_a_refusal_met_again_still_lets_the_structured_output_finish() -> None:
    narrowed: list[int] = []

    def step(turn: Any) -> Any:  # ignores the first narrowed round (the ladder's constrain), obeys the next
        if OUTPUT_TOOL in str(turn.tool_choice):
            narrowed.append(1)
            if len(narrowed) > 1:
                return calls((OUTPUT_TOOL, {"answer": "I could not cancel Bob's orders."}))
        return calls(("cancel_order", {"order_id": f"B-{len(narrowed)}", "user_id": "u-7"}))

    model = ScriptedModel(step, stream=True)
    final, report, _ = await _structured_reply(model)
    assert RAN == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:permission_denied")
    assert final is not None and final.structured_output == {"answer": "I could not cancel Bob's orders."}
    assert OUTPUT_TOOL in str(model.calls[-1].tool_choice)


async def test_real_client_a_refusal_met_again_still_lets_the_structured_output_finish(server: FakeOpenAI) -> None:
    server.plan(*[Reply(tool_calls=[("cancel_order", {"order_id": f"B-{i}", "user_id": "u-7"})]) for i in range(3)],
                Reply(tool_calls=[(OUTPUT_TOOL, {"answer": "Could not cancel Bob's orders."})]),
                Reply(tool_calls=[(OUTPUT_TOOL, {"answer": "Could not cancel Bob's orders."})]))
    model = build_model(server)
    try:
        final, report, _ = await _structured_reply(model)
    finally:
        await model.client.close()
    assert RAN == []
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:permission_denied")
    choices = [body.get("tool_choice") for body in server.requests]
    assert any(OUTPUT_TOOL in str(choice) for choice in choices[3:]), choices
    assert final is not None and final.structured_output == {"answer": "Could not cancel Bob's orders."}

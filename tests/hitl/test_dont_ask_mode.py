"""Round 142 c (a doc note made a promise): under AgentScope's `DONT_ASK` permission
mode (an unattended run: nobody answers; AgentScope turns its own engine's asks into
denials), a call the harness would put to a human (`ask_when`) parked the reply
`waiting_input` for nobody. It is refused (`permission_denied`), the model told it
needs the user's approval, and the run goes on; in the default mode it is asked."""
from __future__ import annotations

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.permission import PermissionMode

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
RAN: list[str] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(order_id)
    return f"refunded {amount} on {order_id}"


@pytest.mark.parametrize("mode", [PermissionMode.DONT_ASK, PermissionMode.DEFAULT])
async def test_a_call_needing_a_human_is_refused_where_nobody_can_be_asked(mode: PermissionMode) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", ask_when=lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None)}),
        load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 80.0})),
                           text("The refund needs your approval.")])
    agent = make_agent(model, [refund], h.middlewares())
    agent.state.permission_context.mode = mode
    with h.acting_for(ALICE):
        events, final = await run(agent, "refund A-1")
    report = h.last_report(agent)
    asked = any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert RAN == []
    if mode == PermissionMode.DEFAULT:
        assert asked and report.terminal_state is TerminalState.WAITING_INPUT
        return
    assert not asked and report.terminal_state is TerminalState.COMPLETED
    assert "needs a human's approval (refunds over $50 need a human)" in tool_messages(model.calls[-1])[-1]
    assert report.refusals == {"permission_denied": 1}
    assert final.get_text_content() == "The refund needs your approval."

"""Round 129 a (tell the user the truth): round 128 keeps a stopped run's own
mutations apart ("What I did before stopping", ten kept) so lookups never push
out what it did; a sub-agent's cancel is still pushed out of the lead's
stopped answer by five later lookups.

README "What the caller receives": a stop -> "`fallback_text` ... plus a short,
redacted list of what the run did (its last ten mutations ...) and what it
found"; hook 24: a sub-agent's action is the conversation's ("a sub-agent's
run nested in it" backs claims: `facts.done_otherwise`). CHANGELOG round 128:
"A stopped run's 'what I found' pushed out its own cancel behind five lookups:
actions are listed apart".

Attack: the lead delegates "cancel A-1" to a sub-agent (same Harness) that
cancels it and answers; the lead then makes five lookups and hits
`max_model_calls`. The user reads "could not complete ... try again" and a list
of lookups: nothing says A-1 was cancelled.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, delegating_tool, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

CANCELLED: list[str] = []


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    CANCELLED.append(order_id)
    return f"order {order_id} cancelled, refund of $50 on its way"


async def lookup(item: str) -> str:
    """Look up an item's stock.

    Args:
        item (str): The item.
    """
    return f"item {item}: in stock, 3 left"


async def test_a_stopped_lead_tells_the_user_about_its_sub_agents_cancel() -> None:
    CANCELLED.clear()
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation"),
                                     "lookup": ToolPolicy(role="lookup")}, max_model_calls=9),
                load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("cancel_order", {"order_id": "A-1"})), text("Cancelled.")]),
                       h.instrument(Toolkit(tools=[tool(cancel_order)])), middlewares=h.middlewares())
    lead_script = [calls(("delegate", {"task": "cancel order A-1"}))] + [
        calls(("lookup", {"item": f"mug{i}"})) for i in range(10)]
    lead = make_agent(ScriptedModel(lead_script),
                      h.instrument(Toolkit(tools=[tool(delegating_tool(child)), tool(lookup)])),
                      middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(lead, "cancel A-1, then find me a mug")
    report = h.last_report(lead)
    received = final.get_text_content() or ""

    assert CANCELLED == ["A-1"]  # the sub-agent cancelled A-1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert "could not complete" in received
    # the user must be told the cancel happened before the stop
    assert "cancel" in received.split("before stopping", 1)[-1].lower(), received

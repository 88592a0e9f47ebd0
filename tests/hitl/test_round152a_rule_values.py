"""Round 152 a's doc note: an `ask_when` written `args["amount"] > 50 and "reason"`
returns `False` when nothing needs a human, and the call was parked with the question
"False" (an empty text asked with an empty reason). README "Ask a human": a text is the
reason (an empty one says which rule asks); any other value asks when true.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{order_id}")
    return "refunded"


@pytest.mark.parametrize("rule, amount, asked", [
    (lambda args: args["amount"] > 50 and "refunds over $50 need a human", 20.0, None),
    (lambda args: args["amount"] > 50 and "refunds over $50 need a human", 80.0, "refunds over $50 need a human"),
    (lambda args: args["amount"] > 50, 80.0, "the approval rule of refund asks a human"),
    (lambda args: args["amount"] > 50, 20.0, None),
    (lambda args: "", 20.0, "the approval rule of refund asks a human"),
    (lambda args: 0, 20.0, None),
])
async def test_what_an_ask_when_returns_decides_whether_it_asks(rule: Any, amount: float, asked: str | None) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", ask_when=rule)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "o-1", "amount": amount})), text("Done.")])
    agent = make_agent(model, [refund], h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund o-1")
    report = h.last_report(agent)
    questions = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
    if asked is None:
        assert not questions and RAN == ["refund:o-1"] and report.terminal_state is TerminalState.COMPLETED
    else:
        assert questions and RAN == [] and report.terminal_state is TerminalState.WAITING_INPUT
        assert report.reason == asked

"""Round 127 b: sentinels that send the model to a tool its caller may not use.

README intro: "a refused call answers with a short *sentinel* the model can act on";
"Sentinel codes": "Format: `[harness:<code>] <what to do next>`"; hook 6
authorization_gate: "The principal's `allowed_tools` ... `permission_denied`" (its
sentinel: "Do not retry; tell the user this action is not permitted for their
account"); "Arguments the model got wrong": the `bad_arguments` sentinel ends "Call it
again with {...}".

Attack: a signed-in account whose `allowed_tools` lets it cancel but not look up
orders (`cancel_order` requires `lookup_order`).
(1) The model cancels: `sequence_gate` answers "Call lookup_order for order_id="A-1"
first" -- a step this account can never take (the next call is `permission_denied`).
(2) The model calls `lookup_order` with malformed arguments: the harness rewrites
AgentScope's schema error into `bad_arguments` "lookup_order was not run ... Call it
again with {"order_id": <string>, "user_id": "u-42"}" -- an invitation to call a tool
that `permission_denied` had just told it not to retry.

What happened: both sentinels tell the model something false about what it can do
next (the first is the only answer to a cancel this account may never get past).
Should: a tool the bound principal may not use is never offered as the next step;
the refusal says the action is not available to the account.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, Prerequisite, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

CANCEL_ONLY = Principal(user_id="u-42", tenant="acme", allowed_tools={"cancel_order"})


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order. Args: order_id (str): The order. user_id (str): Its owner."""
    return f"order {order_id}: paid"


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order. Args: order_id (str): The order. user_id (str): Its owner."""
    return f"order {order_id} cancelled"


def _harness() -> Harness:
    return Harness(HarnessConfig(tools={
        "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
        "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                   requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])]),
    }), load_entry_points=False, environ={})


async def _told(turns: list) -> list[str]:
    h = _harness()
    model = ScriptedModel([*turns, text("Sorry.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup_order), tool(cancel_order)])), h.middlewares())
    with h.acting_for(CANCEL_ONLY):
        await run(agent, "cancel A-1")
    return [tool_messages(c)[-1] for c in model.calls[1:]]


async def test_a_prerequisite_the_account_may_not_use_is_not_offered_as_the_next_step() -> None:
    told = await _told([calls(("cancel_order", {"order_id": "A-1", "user_id": "u-42"}))])
    assert "Call lookup_order" not in told[0], (
        f"the account may not use lookup_order, yet the model is told to call it first: {told[0]}")


async def test_a_tool_the_account_may_not_use_is_not_offered_again_for_bad_arguments() -> None:
    told = await _told([calls(("lookup_order", {"order_id": 5}))])
    assert "Call it again" not in told[0], (
        f"the account may not use lookup_order, yet the model is invited to call it again: {told[0]}")

"""Round 131 a. A refund that RAN but whose result was withheld (pii block) is, one
reply later, told to the user as "not done", and the retry the correction invites
refunds the customer a second time.

README hooks table, final_answer_audit (24): "a call that ran but whose result the
harness withheld for what it says, `pii` `block` or an injection, is unconfirmed ... a
claim of it is corrected as such, 'I cannot confirm that ... went through ... Check
before you try it again', never as not done", and claims count "in the agent's earlier
replies as its context keeps them". repeat_call_gate (11): "Identical call ... that
already ran though its result was withheld: `duplicate_call` (a mutation's for good)".

Attack: `refund` is a mutation whose receipt carries the customer's e-mail
(`pii={"email": "block"}`). Reply 1: the model refunds A-1 (it runs, its result is
withheld) and says it cannot show the receipt. Reply 2 ("so did A-1 go through?
if not, do it"): the model answers "Order A-1 has been refunded." -- then, told it was
not done, the user asks again and the model calls refund A-1 once more.

What happens: the unconfirmed mark (`facts.unconfirmed`, `done_unread`) lives in reply
1's run only. In reply 2 the claim finds no success in the context (the withheld result
is an error block) and no unconfirmed call: the user reads "refund (order_id A-1) did
not succeed in this conversation, so that has not been done. ... Please try again";
in reply 3 the identical refund is admitted and runs again: the customer is refunded
twice.
Should: an earlier reply's withheld-but-made call (readable from the context: the
withheld sentinel is the harness's own) counts as unconfirmed for claims and for the
repeat gate, as its successes do.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDED: list[str] = []
CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?refunded"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDED.append(order_id)
    return f"order {order_id} refunded; receipt sent to jane.doe@example.com"


@pytest.mark.xfail(strict=True, reason="README limit: a withheld call's unconfirmed outcome is known in its own run only")
async def test_an_earlier_replys_withheld_refund_is_not_told_as_not_done() -> None:
    REFUNDED.clear()
    policy = ToolPolicy(role="mutation", claims=[CLAIM], pii={"email": "block"})
    h = Harness(HarnessConfig(tools={"refund": policy}), load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("refund", {"order_id": "A-1"})), text("I asked for the refund; its receipt cannot be shown here."),
        text("Yes: order A-1 has been refunded."),
        calls(("refund", {"order_id": "A-1"})), text("Retried."), text("x"),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "refund my order A-1")
        _, second = await run(agent, "so did A-1 go through? if not, do it")
        received = second.get_text_content() or ""
        await run(agent, "you said it was not done: please try again")
    assert "has not been done" not in received and "did not succeed" not in received, (
        f"the refund of A-1 ran (made {REFUNDED}); the user read: {received!r}")
    assert REFUNDED == ["A-1"], f"refunded {len(REFUNDED)} times: {REFUNDED}"

"""Round 138 a: a mutation that timed out, whose error text the harness withheld.

README (Limits / deadline paragraph, round 137): "A mutation that times out
(`TimeoutError`: it may have taken effect) is told so to the model ("check before you
call it again"), and a claim of it is corrected as unconfirmed, never as not done."

Attack: `cancel_order` (mutation, `pii={"email": "block"}`) raises
`TimeoutError("no answer from the orders API for jane.doe@example.com within 10 s")`:
the error text carries the customer's e-mail, so content_filter withholds it
(`pii_blocked`). `CallFlow.shape` reads `timed_out` only when no refusal was met
(`refusal is None and ...`), and `done_unread` only when the call succeeded
(`ran = result.ok`): the timed-out cancel is neither, so it is filed as a plain failure.

What happened: the model's truthful "order A-1 was cancelled" is corrected as "did not
succeed in this conversation, so that has not been done. Please try again": the
invitation to a second cancel round 137 removed for a TimeoutError.
Should: corrected as unconfirmed ("I cannot confirm ... Check before you try it again").
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"


@pytest.mark.parametrize("pii", [None, {"email": "block"}], ids=["control", "email_blocked"])
async def test_timed_out_cancel_whose_error_is_withheld_is_not_told_as_not_done(pii) -> None:
    ran: list[str] = []

    async def cancel_order(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        ran.append(order_id)
        raise TimeoutError("no answer from the orders API for jane.doe@example.com within 10 s")

    policy = ToolPolicy(role="mutation", claims=[CLAIM], **({"pii": pii} if pii else {}))
    h = Harness(HarnessConfig(tools={"cancel_order": policy}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1"})), text("Order A-1 was cancelled.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "cancel my order A-1")
    said = final.get_text_content() or ""
    report = h.last_report(agent)
    assert ran == ["A-1"]
    assert report.reason == "unsupported_claim", report.reason
    assert "has not been done" not in said and "cannot confirm" in said, said


@pytest.mark.parametrize("pii", [None, {"email": "block"}], ids=["control", "email_blocked"])
async def test_timed_out_cancels_whose_errors_are_withheld_are_missing_from_what_the_run_did(pii) -> None:
    """The same hole in the stopped run's answer. README "What the caller receives":
    `fallback_text` "plus a short, redacted list of what the run did (its last ten
    mutations, ...)"; round 137: a timed-out mutation listed "made; it timed out, so whether
    it went through is not confirmed". Two cancels time out, the run stops at
    `max_model_calls=2`. Control: both listed. Email-blocked error text: "What I did"
    is missing entirely; the user is told nothing of two cancels that may have gone through."""

    async def cancel_order(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        raise TimeoutError("no answer from the orders API for jane.doe@example.com within 10 s")

    policy = ToolPolicy(role="mutation", **({"pii": pii} if pii else {}))
    h = Harness(HarnessConfig(max_model_calls=2, tools={"cancel_order": policy}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1"})), calls(("cancel_order", {"order_id": "A-2"})),
                           text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order)])), middlewares=h.middlewares())
    _, final = await run(agent, "cancel my orders A-1 and A-2")
    said = final.get_text_content() or ""
    assert said.count("cancel_order: made; it timed out, so whether it went through is not confirmed") == 2, said

"""Round 129 a (tell the user the truth): a `post_tool_call` hook refuses a
refund's result BECAUSE the payment gateway declined it (the tool returns its
gateway's answer as text, state success). Round 128 counts any withheld result
of a call that "ran OK" as done (`CallFlow.shape`: `ran = result.ok` before the
hooks, then `facts.done_otherwise`), so the model's made-up "I refunded $50"
stands, and a stopped run says "refund: done (its result was withheld)".

README hook 24: a claim stands when its tool succeeded "(a call that ran but
whose result the harness withheld from the model, `pii` `block` or an
injection, succeeded)": only those two; "What the caller receives": an answer
claiming an action "whose tool never succeeded" -> a correction. A refusal by
an operator's own safety hook is not a withheld result of a call that
succeeded: the operator's hook is the one saying the refund did not happen.

Round 130 c (the ``withheld`` cases): the same receipts also name the
customer's e-mail address and the tool's `pii` blocks it. A result withheld for
what it says (`pii_blocked` at content_filter, priority 5) ended the
post_tool_call chain before the hooks that judge whether the call went through
(`verify`, priority 30; the operator's safety hook, 60), and `CallFlow.shape`
filed the call as done (`WITHHELD_DONE`), so the made-up claim was delivered
and `unsupported_claims` was empty: a call withheld for what it says counts as
done only once those hooks have judged the raw result and found no failure.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookRejectSignal,
    TerminalState,
    ToolPolicy,
    ToolResultContext,
    harness_hook,
)
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

CLAIM = r"refunded (?P<amount>.+?) (?:on|to)"
ATTEMPTS: list[float] = []
FILED: list[str] = []
RECEIPT = {"tail": ""}
"""What follows each receipt: nothing, or the customer's address (withheld)."""
RECEIPTS = pytest.mark.parametrize("withheld", [False, True], ids=["plain", "withheld_for_pii"])


def _receipt(withheld: bool) -> dict[str, Any]:
    """Set the receipts' tail; the `pii` setting of a tool whose receipt it is."""
    RECEIPT["tail"] = "; notice mailed to jane.doe@example.com" if withheld else ""
    return {"pii": {"email": "block"}} if withheld else {}


async def refund(order_id: str, amount: float) -> str:
    """Refund part of an order.

    Args:
        order_id (str): The order.
        amount (float): How much.
    """
    ATTEMPTS.append(amount)
    return f"gateway: DECLINED refund of {amount} on {order_id} (card closed){RECEIPT['tail']}"


@harness_hook("post_tool_call", priority=60, name="declined_guard", kind="safety")
def declined_guard(ctx: ToolResultContext) -> None:
    if ctx.tool.name == "refund" and "DECLINED" in (ctx.result.raw_text or ""):
        raise HookRejectSignal("The refund was declined by the payment gateway: nothing was refunded. "
                               "Tell the user.", code="policy_refused")


def harness(withheld: bool, **kw: Any) -> Harness:
    return Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[CLAIM], **_receipt(withheld)),
                                        "lookup": ToolPolicy(role="lookup")}, **kw),
                   hooks=[declined_guard], load_entry_points=False, environ={})


@RECEIPTS
async def test_a_made_up_refund_after_a_hook_said_declined_is_corrected(withheld: bool) -> None:
    ATTEMPTS.clear()
    h = harness(withheld)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 50})),
                           text("Done: I refunded $50 on order A-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert ATTEMPTS == [50]  # the gateway was asked and DECLINED: no money moved
    # the model was told so by the operator's hook (or that the result was withheld)
    assert ("pii_blocked" if withheld else "declined") in model.calls[-1].last_result
    # the user must not be told a refund happened
    assert received != "Done: I refunded $50 on order A-1.", received
    assert report.unsupported_claims == ["refund"], (report.terminal_state, report.reason)


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return f"result for {q}"


@RECEIPTS
async def test_a_stopped_run_does_not_say_a_declined_refund_was_done(withheld: bool) -> None:
    ATTEMPTS.clear()
    h = harness(withheld, max_model_calls=3)
    script = [calls(("refund", {"order_id": "A-1", "amount": 50}))] + [
        calls(("lookup", {"q": f"q{i}"})) for i in range(5)]
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(refund), tool(lookup)])),
                       middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert ATTEMPTS == [50]
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    # the operator's hook said nothing was refunded: the user must not read "refund: done"
    assert "refund: done" not in received, received


async def submit_claim(policy_id: str) -> str:
    """Submit an insurance claim (the task's last step).

    Args:
        policy_id (str): The policy.
    """
    FILED.append(policy_id)
    return f"insurer: REJECTED claim on {policy_id} (policy lapsed){RECEIPT['tail']}"


@RECEIPTS
async def test_a_finishing_call_that_failed_verify_backs_no_claim(withheld: bool) -> None:
    """The same through the harness's own hook: `mark_terminal` turns a
    finishing call whose `verify` fails into an error (`verification_failed`,
    "Fix this and call submit_claim again"); `CallFlow.shape` read
    `ran = result.ok` before it and files the call in `done_otherwise`, so
    "your claim was submitted" stands (before round 128 it was corrected)."""
    FILED.clear()
    h = Harness(HarnessConfig(tools={"submit_claim": ToolPolicy(
        role="finish", claims=[r"claim (?:on (?P<policy_id>[\w-]+) )?(?:was |has been )?submitted"],
        verify=lambda out: "the insurer rejected it" if "REJECTED" in out else None, **_receipt(withheld))},
        require_finish_tool=False), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_claim", {"policy_id": "P-9"})),
                           text("Good news: your claim on P-9 was submitted.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit_claim)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "file a claim on P-9")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert FILED == ["P-9"]
    # the model was told it did not go through (or that its result was withheld)
    assert ("pii_blocked" if withheld else "verification_failed") in model.calls[-1].last_result
    assert received != "Good news: your claim on P-9 was submitted.", (report.terminal_state, report.reason)
    assert report.unsupported_claims == ["submit_claim"]

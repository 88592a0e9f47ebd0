"""Round 130 c (tell the user the truth): a result withheld for what it says
(`pii_blocked` at content_filter, priority 5) ends the post_tool_call chain
before the hooks that judge whether the call went through: the harness's own
`verify` (mark_terminal, priority 30) and an operator's safety hook (priority
60) never run, and `CallFlow.shape` files the call as "done" anyway
(`WITHHELD_DONE`: `facts.done_otherwise`), so the model's "your claim was
submitted" / "I refunded $50" stands, uncorrected.

README hook 24: a claim stands when its tool succeeded "(a call that ran but
whose result the harness withheld from the model, `pii` `block` or an
injection, succeeded)"; CHANGELOG round 129: "Only what happened counts as done
... a refund an operator's hook refused as 'declined' backed the answer 'I
refunded $50', and a finishing call that failed `verify` did too". Here the
same rejected/declined calls back the claim, because their receipt also names
an e-mail address.

Attack: the insurer/gateway answer (state success) says REJECTED/DECLINED and
names the customer's address; the tool's `pii` blocks e-mail addresses.
What happened: the made-up claim is delivered as written; `unsupported_claims`
is empty. Should: a call withheld for what it says counts as done only once
the hooks that judge the outcome (verify, safety hooks after the filter) have
judged the raw result and found no failure.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookRejectSignal,
    ToolPolicy,
    ToolResultContext,
    harness_hook,
)
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

FILED: list[str] = []
ATTEMPTS: list[float] = []


async def submit_claim(policy_id: str) -> str:
    """Submit an insurance claim (the task's last step).

    Args:
        policy_id (str): The policy.
    """
    FILED.append(policy_id)
    return f"insurer: REJECTED claim on {policy_id} (policy lapsed); notice mailed to jane.doe@example.com"


async def test_a_rejected_finishing_call_withheld_for_pii_backs_a_claim() -> None:
    FILED.clear()
    h = Harness(HarnessConfig(tools={"submit_claim": ToolPolicy(
        role="finish", pii={"email": "block"},
        claims=[r"claim (?:on (?P<policy_id>[\w-]+) )?(?:was |has been )?submitted"],
        verify=lambda out: "the insurer rejected it" if "REJECTED" in out else None)},
        require_finish_tool=False), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_claim", {"policy_id": "P-9"})),
                           text("Good news: your claim on P-9 was submitted.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit_claim)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "file a claim on P-9")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert FILED == ["P-9"]  # the insurer was asked, and REJECTED it
    assert "pii_blocked" in model.calls[-1].last_result
    assert received != "Good news: your claim on P-9 was submitted.", (report.terminal_state, report.reason)
    assert report.unsupported_claims == ["submit_claim"]


async def refund(order_id: str, amount: float) -> str:
    """Refund part of an order.

    Args:
        order_id (str): The order.
        amount (float): How much.
    """
    ATTEMPTS.append(amount)
    return f"gateway: DECLINED refund of {amount} on {order_id} (card closed); contact jane.doe@example.com"


@harness_hook("post_tool_call", priority=60, name="declined_guard_130c", kind="safety")
def declined_guard(ctx: ToolResultContext) -> None:
    if ctx.tool.name == "refund" and "DECLINED" in (ctx.result.raw_text or ""):
        raise HookRejectSignal("The refund was declined by the payment gateway: nothing was refunded. "
                               "Tell the user.", code="policy_refused")


async def test_a_declined_refund_withheld_for_pii_backs_a_claim() -> None:
    ATTEMPTS.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", pii={"email": "block"}, claims=[r"refunded (?P<amount>.+?) (?:on|to)"])}),
        hooks=[declined_guard], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 50})),
                           text("Done: I refunded $50 on order A-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert ATTEMPTS == [50]  # DECLINED: no money moved
    assert received != "Done: I refunded $50 on order A-1.", received
    assert report.unsupported_claims == ["refund"], (report.terminal_state, report.reason)


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return f"result for {q}"


async def test_a_stopped_run_says_a_declined_refund_withheld_for_pii_was_done() -> None:
    """The same declined refund in a run stopped at `max_model_calls`: the user
    reads "What I did before stopping: - refund: done (its result was
    withheld)" though the operator's hook (never run) says nothing was refunded."""
    ATTEMPTS.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", pii={"email": "block"})},
                              max_model_calls=3),
                hooks=[declined_guard], load_entry_points=False, environ={})
    script = [calls(("refund", {"order_id": "A-1", "amount": 50}))] + [
        calls(("lookup", {"q": f"q{i}"})) for i in range(5)]
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(refund), tool(lookup)])),
                       middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    received = final.get_text_content() or ""

    assert ATTEMPTS == [50]
    assert "refund: done" not in received, received

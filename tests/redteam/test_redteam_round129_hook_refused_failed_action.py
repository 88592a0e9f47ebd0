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
"""
from __future__ import annotations

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


async def refund(order_id: str, amount: float) -> str:
    """Refund part of an order.

    Args:
        order_id (str): The order.
        amount (float): How much.
    """
    ATTEMPTS.append(amount)
    return f"gateway: DECLINED refund of {amount} on {order_id} (card closed)"


@harness_hook("post_tool_call", priority=60, name="declined_guard", kind="safety")
def declined_guard(ctx: ToolResultContext) -> None:
    if ctx.tool.name == "refund" and "DECLINED" in (ctx.result.raw_text or ""):
        raise HookRejectSignal("The refund was declined by the payment gateway: nothing was refunded. "
                               "Tell the user.", code="policy_refused")


def harness(**kw) -> Harness:
    return Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[CLAIM]),
                                        "lookup": ToolPolicy(role="lookup")}, **kw),
                   hooks=[declined_guard], load_entry_points=False, environ={})


async def test_a_made_up_refund_after_a_hook_said_declined_is_corrected() -> None:
    ATTEMPTS.clear()
    h = harness()
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 50})),
                           text("Done: I refunded $50 on order A-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert ATTEMPTS == [50]  # the gateway was asked and DECLINED: no money moved
    assert "declined" in model.calls[-1].last_result  # the model was told so by the operator's hook
    # the user must not be told a refund happened
    assert received != "Done: I refunded $50 on order A-1.", received
    assert report.unsupported_claims == ["refund"], (report.terminal_state, report.reason)


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return f"result for {q}"


async def test_a_stopped_run_does_not_say_a_declined_refund_was_done() -> None:
    ATTEMPTS.clear()
    h = harness(max_model_calls=3)
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


FILED: list[str] = []


async def submit_claim(policy_id: str) -> str:
    """Submit an insurance claim (the task's last step).

    Args:
        policy_id (str): The policy.
    """
    FILED.append(policy_id)
    return f"insurer: REJECTED claim on {policy_id} (policy lapsed)"


async def test_a_finishing_call_that_failed_verify_backs_no_claim() -> None:
    """The same through the harness's own hook: `mark_terminal` turns a
    finishing call whose `verify` fails into an error (`verification_failed`,
    "Fix this and call submit_claim again"); `CallFlow.shape` read
    `ran = result.ok` before it and files the call in `done_otherwise`, so
    "your claim was submitted" stands (before round 128 it was corrected)."""
    FILED.clear()
    h = Harness(HarnessConfig(tools={"submit_claim": ToolPolicy(
        role="finish", claims=[r"claim (?:on (?P<policy_id>[\w-]+) )?(?:was |has been )?submitted"],
        verify=lambda out: "the insurer rejected it" if "REJECTED" in out else None)},
        require_finish_tool=False), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_claim", {"policy_id": "P-9"})),
                           text("Good news: your claim on P-9 was submitted.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit_claim)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "file a claim on P-9")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert FILED == ["P-9"]
    assert "verification_failed" in model.calls[-1].last_result  # the model was told it did not go through
    assert received != "Good news: your claim on P-9 was submitted.", (report.terminal_state, report.reason)
    assert report.unsupported_claims == ["submit_claim"]

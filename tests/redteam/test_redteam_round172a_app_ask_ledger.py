"""Round 172 a (a red team on round 171): a call the application's own middleware asked about,
over a spent `on_exhausted="ask"` ledger, was refused `quota_exhausted` on its resume: the
ledger's extension was never offered. It is asked now, and a yes runs the call."""
from __future__ import annotations

from typing import Any

from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from scripted import make_agent

from agentscope_harness import Harness, HarnessConfig, Ledger, Principal, ToolPolicy
from agentscope_harness.testing import ScriptedModel, calls, text

ALICE = Principal(user_id="alice", tenant="acme")
RAN: list[str] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


class AppConfirmsRefunds(MiddlewareBase):
    """The application's own four-eyes rule (placed first, as README "Combining" says)."""

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if input_kwargs["tool_call"].name == "refund" and input_kwargs["tool_call"].state != "allowed":
            return PermissionDecision(behavior=PermissionBehavior.ASK, message="confirm this refund?")
        return await next_handler(**input_kwargs)


async def reply(h: Harness, agent: Any, inputs: Any) -> list[RequireUserConfirmEvent]:
    asked = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", inputs) if isinstance(inputs, str) else inputs):
            if isinstance(item, RequireUserConfirmEvent):
                asked.append(item)
    return asked


def yes(asked: RequireUserConfirmEvent) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(reply_id=asked.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for call in asked.tool_calls])


async def test_a_spent_ask_ledger_is_never_offered_on_a_call_your_middleware_asked_about():
    """Promise (README, "Ask a human"): "`Ledger(cap=8, on_exhausted="ask", extend_by=4)` parks
    the call that would go over the cap ("the retrieval quota (8/8) is used up; approve to
    extend it by 4"); each parked call is asked about"; spend_gate: "a ledger with
    `on_exhausted="ask"` parks the call to ask for an extension". "Combining": put your own
    middlewares first; permission decides whether a human confirms, the harness what policy
    refuses.

    Attack: `refund` under `Ledger(cap=1, on_exhausted="ask")` and the application's own
    confirmation middleware (placed first) that asks about every refund. The first refund is
    confirmed and runs (1/1). The second is asked about by the app, so the harness never
    judged it at the park and made no offer; the user confirms it, and on the resume the
    spent ledger finds no offer: with round 171 d's `asked_here = True` (the park was seen
    here) `_extend_or_ask` returns False: refused `quota_exhausted` ("Answer with what you
    have") - nobody is ever asked for the extension (before 171 d: `approval_mismatch`, "ask
    the user again", the same dead end).
    Should: the resumed call the human approved for the app's reason, over a spent ask-ledger
    with no offer made, is parked with the ledger's question (or the ask made when the harness
    first judges it), not refused.
    """
    RAN.clear()
    h = Harness(HarnessConfig(
        tools={"refund": ToolPolicy(role="mutation", ledgers=["refunds"])},
        ledgers={"refunds": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False, environ={})
    m = ScriptedModel([
        calls(("refund", {"order_id": "o-1", "amount": 20.0})),
        calls(("refund", {"order_id": "o-2", "amount": 30.0})),
        text("Both refunded."),
        text("done"),
    ])
    agent = make_agent(m, [refund], [AppConfirmsRefunds(), *h.middlewares()])
    asked = await reply(h, agent, "refund o-1 and o-2")
    assert len(asked) == 1 and RAN == []
    asked = await reply(h, agent, yes(asked[0]))  # o-1 runs; o-2 is asked about by the app
    assert RAN == ["refund:o-1:20.0"] and len(asked) == 1
    asked_again = await reply(h, agent, yes(asked[0]))  # the user approves o-2
    report = h.last_report(agent)
    # asked for the ledger's extension (parked again), never refused without a question
    assert "quota_exhausted" not in report.refusals, (report.refusals, report.terminal_state, report.reason)
    assert asked_again and "refunds quota" in report.reason, (report.terminal_state, report.reason)


async def test_control_without_your_middleware_the_ledger_asks():
    """Control (holds): the same script without the app's middleware parks o-2 with the
    ledger's question."""
    RAN.clear()
    h = Harness(HarnessConfig(
        tools={"refund": ToolPolicy(role="mutation", ledgers=["refunds"])},
        ledgers={"refunds": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False, environ={})
    m = ScriptedModel([
        calls(("refund", {"order_id": "o-1", "amount": 20.0})),
        calls(("refund", {"order_id": "o-2", "amount": 30.0})),
        text("Both refunded."),
    ])
    agent = make_agent(m, [refund], h.middlewares())
    asked = await reply(h, agent, "refund o-1 and o-2")
    report = h.last_report(agent)
    assert RAN == ["refund:o-1:20.0"] and len(asked) == 1 and "refunds quota" in report.reason, report.reason


async def test_the_extension_asked_on_the_resume_runs_the_call_once_approved():
    RAN.clear()
    h = Harness(HarnessConfig(
        tools={"refund": ToolPolicy(role="mutation", ledgers=["refunds"])},
        ledgers={"refunds": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False, environ={})
    m = ScriptedModel([
        calls(("refund", {"order_id": "o-1", "amount": 20.0})),
        calls(("refund", {"order_id": "o-2", "amount": 30.0})),
        text("Both refunded."),
    ])
    agent = make_agent(m, [refund], [AppConfirmsRefunds(), *h.middlewares()])
    asked = await reply(h, agent, "refund o-1 and o-2")
    asked = await reply(h, agent, yes(asked[0]))  # o-1 runs; the app asks about o-2
    asked = await reply(h, agent, yes(asked[0]))  # the app's yes: the ledger asks for its extension
    assert RAN == ["refund:o-1:20.0"] and len(asked) == 1
    assert await reply(h, agent, yes(asked[0])) == []  # the extension approved
    report = h.last_report(agent)
    assert RAN == ["refund:o-1:20.0", "refund:o-2:30.0"] and report.terminal_state == "completed"
    assert report.extensions == [{"what": "ledger:refunds", "by": 1, "approved_by": "alice"}]
    assert not report.refusals

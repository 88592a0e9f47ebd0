"""Round 171 d (scenarios on "Ask a human" and "Combining with AgentScope's built-in
middlewares"; 49 of 51 held): a call the application's own middleware (placed first, as
the README says) asked about was taken as parked elsewhere: with the harness also wanting
a human for it (`ask_when`, `ctx.ask`) the approved call was refused `approval_mismatch`
at every answer, and without one an edited answer ran unchecked."""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from scripted import make_agent
from server import Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, HookContext, Principal, ToolPolicy, harness_hook
from agentscope_harness.testing import ScriptedModel, calls, text

ALICE = Principal(user_id="alice", tenant="acme")
RAN: list[str] = []


async def refund(user_id: str, order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        user_id (str): The customer.
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


class AppConfirmsRefunds(MiddlewareBase):
    """The application's own four-eyes rule: every refund is confirmed by a human."""

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if input_kwargs["tool_call"].name == "refund" and input_kwargs["tool_call"].state != "allowed":
            return PermissionDecision(behavior=PermissionBehavior.ASK, message="confirm this refund?")
        return await next_handler(**input_kwargs)


@harness_hook("pre_tool_call", priority=25, name="big_refunds", kind="observer")
def big_refunds(ctx: HookContext) -> None:
    if ctx.tool.name == "refund" and ctx.tool.args["amount"] > 50:
        ctx.ask("refunds over $50 need a human")


def harness(how: str) -> Harness:
    if how == "ask_when":
        return Harness(HarnessConfig(tools={"refund": ToolPolicy(
            role="mutation", ask_when=lambda args: "refunds over $50 need a human" if args["amount"] > 50 else None)}),
            load_entry_points=False, environ={})
    hooks = [big_refunds] if how == "ctx.ask" else []
    return Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation")}), hooks=hooks,
                   load_entry_points=False, environ={})


async def reply(h: Harness, agent: Any, inputs: Any) -> list[RequireUserConfirmEvent]:
    asked = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", inputs) if isinstance(inputs, str) else inputs):
            if isinstance(item, RequireUserConfirmEvent):
                asked.append(item)
    return asked


def yes(asked: RequireUserConfirmEvent, edit: str | None = None) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(reply_id=asked.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call if edit is None else call.model_copy(update={"input": edit}))
        for call in asked.tool_calls])


@pytest.mark.parametrize("how", ["ask_when", "ctx.ask"])
async def test_a_call_your_middleware_asked_about_runs_once_approved_as_shown(server, how: str):
    """README "Combining": permission decides whether a human must confirm, the harness what
    policy refuses; "Security": a call asked about outside the harness's sight is compared
    with what the park shows of it. AgentScope's real OpenAIChatModel."""
    RAN.clear()
    args = {"user_id": "alice", "order_id": "o-1", "amount": 80.0}
    server.plan(Reply(tool_calls=[("refund", args)]), Reply(text="Refunded."))
    h = harness(how)
    agent = make_agent(model(server, "gpt-test"), [refund], [AppConfirmsRefunds(), *h.middlewares()])
    asked = await reply(h, agent, "refund o-1, $80")
    assert len(asked) == 1 and RAN == [] and h.last_report(agent).terminal_state == "waiting_input"
    assert await reply(h, agent, yes(asked[0])) == []
    report = h.last_report(agent)
    assert RAN == ["refund:o-1:80.0"] and report.terminal_state == "completed", report.refusals
    assert not report.refusals and "resume_unverified" not in {d.action for d in report.decisions}


@pytest.mark.parametrize("how", ["none", "ask_when"])
async def test_an_edited_answer_to_your_middlewares_question_is_refused(how: str):
    """README "Security": "an answer that renames or edits it is refused (`approval_mismatch`)":
    the amount raised from 80 to 8000 in the answer ran (decision `resume_unverified`)."""
    RAN.clear()
    h = harness(how)
    m = ScriptedModel([calls(("refund", {"user_id": "alice", "order_id": "o-1", "amount": 80.0})), text("ok")])
    agent = make_agent(m, [refund], [AppConfirmsRefunds(), *h.middlewares()])
    asked = await reply(h, agent, "refund o-1")
    await reply(h, agent, yes(asked[0], edit='{"user_id": "alice", "order_id": "o-1", "amount": 8000.0}'))
    report = h.last_report(agent)
    assert RAN == [] and report.refusals == {"approval_mismatch": 1}

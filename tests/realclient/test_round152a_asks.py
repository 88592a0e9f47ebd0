"""Round 152 a (scenarios: "Ask a human", about 40 held, 17 with AgentScope's real
`OpenAIChatModel`): a hook's `ctx.ask` replaced the question asked before it, and
recorded an `ask` decision at once, for calls nobody was asked about.

1. README "Ask a human": "a hook's question and the policy's `ask_when` are both asked
   and reported, joined by `; `". A hook asking at priority 60 replaced the retrieval
   ledger's extension question (`spend_gate`, priority 30): the human approved "searching
   costs money" and the run's quota was extended by 2, an extension never shown. Now every
   hook's question is joined, in order (`HookContext.ask`).
2. "A call a gate refuses is never asked about"; in `DONT_ASK` mode a call is refused,
   "never parked for nobody"; a remembered approval runs "without asking". `ctx.ask`
   recorded its `ask` decision when the hook ran: beside a later gate's refusal, the
   `DONT_ASK` refusal (credited to `ask_when`), `allow_remembered`, and again on the
   resume. Now a hook's `ask` is recorded when the call is put to a human, as
   `ask_when`'s is (`CallFlow.asked`), and the `DONT_ASK` refusal names the asking hook.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionMode
from scripted import make_agent
from server import Reply
from side_kit import model as real_model

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookContext,
    HookRejectSignal,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.testing import ScriptedModel, calls, text

pytestmark = pytest.mark.asyncio

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


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    RAN.append(f"search:{q}")
    return f"found {q}"


async def stream(h: Harness, agent: Any, inputs: Any) -> tuple[list[Any], Any]:
    events: list[Any] = []
    final = None
    src = UserMsg("user", inputs) if isinstance(inputs, str) else inputs
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(src, yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)
    return events, final


def question(events: list[Any]) -> RequireUserConfirmEvent | None:
    return next((e for e in events if isinstance(e, RequireUserConfirmEvent)), None)


def yes(asked: RequireUserConfirmEvent | None) -> UserConfirmResultEvent:
    assert asked is not None
    return UserConfirmResultEvent(reply_id=asked.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for call in asked.tool_calls])


QUOTA_QUESTION = "the retrieval quota (1/1) is used up; approve to extend it by 2"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@harness_hook("pre_tool_call", priority=60, name="paid_search", kind="observer")
def paid_search(ctx: HookContext) -> None:
    if ctx.tool.name == "search":
        ctx.ask("searching costs money")


@harness_hook("pre_tool_call", priority=25, name="four_eyes", kind="observer")
def four_eyes(ctx: HookContext) -> None:
    if ctx.tool.name in ("refund", "search"):
        ctx.ask("refunds need four eyes" if ctx.tool.name == "refund" else "searches need a human")


@harness_hook("pre_tool_call", priority=90, name="no_refunds_today", kind="safety")
def no_refunds_today(ctx: HookContext) -> None:
    if ctx.tool.name == "refund":
        raise HookRejectSignal("No refunds are made today; tell the user.", code="policy_refused")


# ---------------------------------------------------------------- finding 1

async def test_a_later_hooks_question_is_joined_to_the_ledgers_extension_question(server: Any) -> None:
    server.plan(Reply(tool_calls=[("search", {"q": "mugs"})]), Reply(tool_calls=[("search", {"q": "cups"})]),
                Reply(text="Found mugs and cups."))
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                              ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=2)}),
                hooks=[paid_search], load_entry_points=False)
    agent = make_agent(real_model(server, "gpt-test"), [search], h.middlewares())
    events, _ = await stream(h, agent, "find mugs and cups")
    assert h.last_report(agent).reason == "searching costs money"  # the first search: the hook alone asks
    events, _ = await stream(h, agent, yes(question(events)))
    parked = h.last_report(agent)
    assert RAN == ["search:mugs"] and parked.terminal_state == TerminalState.WAITING_INPUT
    assert QUOTA_QUESTION in parked.reason, f"the human is asked only: {parked.reason!r}"


async def test_the_extension_a_yes_grants_was_in_the_question() -> None:
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                              ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=2)}),
                hooks=[paid_search], load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    events, _ = await stream(h, agent, "find")
    events, _ = await stream(h, agent, yes(question(events)))
    shown = h.last_report(agent).reason
    await stream(h, agent, yes(question(events)))
    granted = h.last_report(agent).extensions
    assert granted == [{"what": "ledger:retrieval", "by": 2, "approved_by": "alice"}]
    assert "extend" in shown, f"extension granted on a question that never named it: {shown!r}"


# ---------------------------------------------------------------- finding 2

def _asks(report: Any) -> list[str]:
    return [d.hook for d in report.decisions if d.action == "ask"]


async def test_a_call_a_later_gate_refuses_is_not_reported_asked_about() -> None:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation")}),
                hooks=[four_eyes, no_refunds_today], load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("refund", {"user_id": "alice", "order_id": "o-1", "amount": 80.0})),
                                      text("No refunds today.")]), [refund], h.middlewares())
    events, _ = await stream(h, agent, "refund o-1")
    report = h.last_report(agent)
    assert question(events) is None and RAN == [] and report.refusals == {"policy_refused": 1}
    assert _asks(report) == [], f"reported asked: {_asks(report)}"


async def test_dont_ask_mode_reports_the_refusal_of_the_asking_hook_only(server: Any) -> None:
    server.plan(Reply(tool_calls=[("search", {"q": "mugs"})]), Reply(text="It needs your approval."))
    h = Harness(HarnessConfig(), hooks=[four_eyes], load_entry_points=False)
    agent = make_agent(real_model(server, "gpt-test"), [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    events, _ = await stream(h, agent, "find mugs")
    report = h.last_report(agent)
    assert question(events) is None and RAN == [] and report.refusals == {"permission_denied": 1}
    assert _asks(report) == [], f"reported asked: {_asks(report)}"
    assert [d.hook for d in report.decisions if d.code == "permission_denied"] == ["four_eyes"]


async def test_a_remembered_approval_reports_no_ask() -> None:
    h = Harness(HarnessConfig(), hooks=[four_eyes], load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    h.approve(ALICE, agent.state.session_id, "search", ttl_s=600)
    events, _ = await stream(h, agent, "go")
    report = h.last_report(agent)
    assert question(events) is None and RAN == ["search:a"]
    assert _asks(report) == [], f"reported asked: {_asks(report)}"


async def test_one_question_is_reported_asked_once_after_the_resume() -> None:
    h = Harness(HarnessConfig(), hooks=[four_eyes], load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    events, _ = await stream(h, agent, "go")
    await stream(h, agent, yes(question(events)))
    report = h.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED and RAN == ["search:a"]
    assert _asks(report) == ["four_eyes"], f"one question, reported: {_asks(report)}"


async def test_a_yes_extends_only_when_the_approved_call_does_not_fit() -> None:
    """README: each parked call is asked about; two calls of one batch over a spent
    ledger, both approved: the first call's extension (2) covers the second."""
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                              ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=2)}),
                load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"}), ("search", {"q": "c"})),
                           text("done")])
    agent = make_agent(model, [search], h.middlewares())
    events, _ = await stream(h, agent, "find")
    asked = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
    assert RAN == ["search:a"] and sum(len(e.tool_calls) for e in asked) == 2
    answer = UserConfirmResultEvent(reply_id=asked[0].reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for e in asked for call in e.tool_calls])
    await stream(h, agent, answer)
    report = h.last_report(agent)
    assert sorted(RAN) == ["search:a", "search:b", "search:c"]
    assert report.extensions == [{"what": "ledger:retrieval", "by": 2, "approved_by": "alice"}]

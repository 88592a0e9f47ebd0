"""Ask a human: a real Agent parks on AgentScope's own confirmation flow,
the resumed call is judged again and must be the exact call the human was
shown, resumed by the caller who parked it; remembered approvals; budget
extensions approved by a human."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import RAN, ScriptedModel, calls, make_agent, parking_tools, run, search, text, tool, tool_messages

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)

ALICE = Principal(user_id="alice", tenant="acme")
BOB = Principal(user_id="bob", tenant="acme")
REFUND_ASK = "refunds over $50 need a human"


async def refund(user_id: str, order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        user_id (str): The customer.
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{user_id}:{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


def over_50(args: dict[str, Any]) -> str | None:
    return REFUND_ASK if args["amount"] > 50 else None


def shop(**kw: Any) -> Harness:
    return Harness(HarnessConfig(
        tools={
            "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, ask_when=over_50),
            "search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
        },
        ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=2)},
        **kw,
    ), load_entry_points=False)


def refund_call(amount: float = 80.0, user: str = "alice", order: str = "o-1") -> Any:
    return calls(("refund", {"user_id": user, "order_id": order, "amount": amount}))


async def reply(h: Harness, agent: Any, principal: Principal | None, inputs: Any = None,
                prompt: str = "hi") -> list[Any]:
    if principal is None:
        events, _ = await run(agent, prompt, inputs)
    else:
        with h.acting_for(principal):
            events, _ = await run(agent, prompt, inputs)
    return events


def asked(events: list[Any]) -> RequireUserConfirmEvent | None:
    return next((e for e in events if isinstance(e, RequireUserConfirmEvent)), None)


def confirm(ask: RequireUserConfirmEvent, confirmed: bool = True, **replace: Any) -> UserConfirmResultEvent:
    """The client's answer: the shown call, sent back (JSON round trip, as
    over the wire), optionally with fields replaced."""
    results = []
    for call in ask.tool_calls:
        sent = type(call).model_validate_json(call.model_dump_json()).model_copy(update=replace)
        results.append(ConfirmResult(confirmed=confirmed, tool_call=sent))
    return UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=results)


async def parked_refund(h: Harness, amount: float = 80.0, after: list[Any] | None = None):
    model = ScriptedModel([refund_call(amount), *(after or [text("done")])])
    agent = make_agent(model, [refund, search], h.middlewares())
    events = await reply(h, agent, ALICE)
    ask = asked(events)
    assert ask is not None and RAN == []
    return model, agent, ask


# ------------------------------------------------------------------ asking

async def test_ask_when_parks_the_call_and_the_report_says_why() -> None:
    h = shop()
    _, agent, ask = await parked_refund(h)
    report = h.last_report(agent)
    assert report.terminal_state == TerminalState.WAITING_INPUT
    assert report.reason == REFUND_ASK
    assert any(d.action == "ask" and d.tool == "refund" for d in report.decisions)
    assert json.loads(ask.tool_calls[0].input)["amount"] == 80.0

    await reply(h, agent, ALICE, confirm(ask))
    report = h.last_report(agent)
    assert RAN == ["refund:alice:o-1:80.0"]
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.tool_calls == {"refund": 1}
    assert [d.action for d in report.decisions].count("ask") == 1  # asked once; the resume is the answer


async def test_a_call_under_the_threshold_is_not_asked_about() -> None:
    h = shop()
    model = ScriptedModel([refund_call(20.0), text("done")])
    agent = make_agent(model, [refund], h.middlewares())
    assert asked(await reply(h, agent, ALICE)) is None
    assert RAN == ["refund:alice:o-1:20.0"]


async def test_a_refused_call_is_never_asked_about() -> None:
    h = shop()
    model = ScriptedModel([refund_call(80.0, user="bob"), text("done")])
    agent = make_agent(model, [refund], h.middlewares())
    events = await reply(h, agent, ALICE)
    assert asked(events) is None and RAN == []
    assert "[harness:permission_denied]" in tool_messages(model.calls[-1])[-1]
    assert not any(d.action == "ask" for d in h.last_report(agent).decisions)


async def test_a_hook_asks_with_ctx_ask_and_the_resume_runs_it() -> None:
    @harness_hook("pre_tool_call", priority=25, name="ask_for_search", kind="observer")
    def ask_for_search(ctx: HookContext) -> None:
        if ctx.tool.name == "search":
            ctx.ask("searching costs money")

    h = Harness(HarnessConfig(), hooks=[ask_for_search], load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "mug"})), text("found")])
    agent = make_agent(model, [search], h.middlewares())
    ask = asked(await reply(h, agent, None))
    assert ask is not None and h.last_report(agent).reason == "searching costs money"
    await reply(h, agent, None, confirm(ask))
    assert RAN == ["mug"]
    assert h.last_report(agent).terminal_state == TerminalState.COMPLETED


async def test_async_ask_when_is_awaited() -> None:
    async def ask_async(args: dict[str, Any]) -> str | None:
        return "async rule" if args["q"] == "secret" else None

    h = Harness(HarnessConfig(tools={"search": ToolPolicy(ask_when=ask_async)}), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "secret"})), text("x")])
    agent = make_agent(model, [search], h.middlewares())
    assert asked(await reply(h, agent, None)) is not None
    assert h.last_report(agent).reason == "async rule"


async def test_a_failing_ask_when_asks_a_human() -> None:
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(ask_when=lambda a: 1 / 0)}), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "x"})), text("x")])
    agent = make_agent(model, [search], h.middlewares())
    assert asked(await reply(h, agent, None)) is not None and RAN == []
    assert "ZeroDivisionError" in h.last_report(agent).reason


# ------------------------------------------------------------- resuming

def _denied_text(model: ScriptedModel) -> str:
    return tool_messages(model.calls[-1])[-1]


@pytest.mark.parametrize("edit", [
    {"amount": 8000.0},
    {"order_id": "o-2"},
    {"order_id": "o-1 "},
    {"order_id": "o\u20031"},
    {"note": "extra key"},
])
async def test_a_confirmation_carrying_other_arguments_is_refused(edit: dict[str, Any]) -> None:
    h = shop()
    model, agent, ask = await parked_refund(h)
    shown = json.loads(ask.tool_calls[0].input)
    await reply(h, agent, ALICE, confirm(ask, input=json.dumps({**shown, **edit})))
    report = h.last_report(agent)
    assert RAN == []
    assert report.refusals == {"approval_mismatch": 1}
    assert "[harness:approval_mismatch]" in _denied_text(model)


async def test_a_confirmation_renaming_the_tool_is_refused() -> None:
    h = shop()
    model, agent, ask = await parked_refund(h)
    await reply(h, agent, ALICE, confirm(ask, name="search", input=json.dumps({"q": "x"})))
    assert RAN == [] and h.last_report(agent).refusals == {"approval_mismatch": 1}


async def test_a_tampered_stored_call_is_refused() -> None:
    """The stored state is edited between park and resume; the client
    confirms the (tampered) call it reads back from that state."""
    h = shop()
    model, agent, _ = await parked_refund(h)
    stored = next(b for b in agent.state.context[-1].get_content_blocks("tool_call"))
    stored.input = json.dumps({"user_id": "alice", "order_id": "o-1", "amount": 99999.0})
    tampered = UserConfirmResultEvent(
        reply_id=agent.state.reply_id,
        confirm_results=[ConfirmResult(confirmed=True, tool_call=stored)],
    )
    await reply(h, agent, ALICE, tampered)
    assert RAN == [] and h.last_report(agent).refusals == {"approval_mismatch": 1}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.text(min_size=1, max_size=8), amount=st.floats(51, 1e6, allow_nan=False))
async def test_any_argument_other_than_the_shown_one_is_refused(order: str, amount: float) -> None:
    h = shop()
    RAN.clear()
    model, agent, ask = await parked_refund(h)
    edited = {"user_id": "alice", "order_id": order, "amount": amount}
    await reply(h, agent, ALICE, confirm(ask, input=json.dumps(edited)))
    if edited == {"user_id": "alice", "order_id": "o-1", "amount": 80.0}:
        assert RAN == ["refund:alice:o-1:80.0"]
    else:
        assert RAN == [] and h.last_report(agent).refusals == {"approval_mismatch": 1}


@pytest.mark.parametrize("confirmed", [True, False])
@pytest.mark.parametrize("resumer", [BOB, None, Principal(user_id="alice", tenant="other")])
async def test_a_resume_by_another_principal_or_none_acts_for_nobody(
    resumer: Principal | None, confirmed: bool,
) -> None:
    """The approved call is refused, and so is the rest of the reply (red
    team: the model's next calls were judged for the user who parked it, and
    ran, while another was bound). It ends at once, without another model
    call and without telling the resumer what the run found."""
    h = shop()
    model, agent, ask = await parked_refund(h, after=[
        calls(("refund", {"user_id": "alice", "order_id": "o-2", "amount": 10.0}), ("search", {"q": "alice"})),
        text("done for alice"),
    ])
    events = await reply(h, agent, resumer, confirm(ask, confirmed=confirmed))
    report = h.last_report(agent)
    assert RAN == []
    assert len(model.calls) == 1
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")
    final = [e for e in events if type(e).__name__ == "ReplyEndEvent"]
    answer = agent.state.context[-1].get_text_content() or ""
    assert final and answer == h.config.fallback_text.format(reason="a step it needed was refused")
    if confirmed:
        assert report.refusals == {"permission_denied": 1}


async def test_agentscopes_own_ask_is_protected_the_same_way() -> None:
    h = Harness(load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "shown"})), text("x")])
    agent = make_agent(model, [FunctionTool(search)], h.middlewares())  # AgentScope asks
    with h.acting_for(ALICE):
        ask = asked((await run(agent))[0])
    assert ask is not None
    await reply(h, agent, ALICE, confirm(ask, input=json.dumps({"q": "other"})))
    assert RAN == [] and h.last_report(agent).refusals == {"approval_mismatch": 1}


async def test_a_human_edit_made_through_the_harness_is_the_approved_call() -> None:
    h = shop()
    _, agent, ask = await parked_refund(h)
    with h.acting_for(BOB), pytest.raises(PermissionError):
        h.approve_edit(agent, ask.tool_calls[0], {"user_id": "alice", "order_id": "o-1", "amount": 60.0})
    with h.acting_for(ALICE):
        edited = h.approve_edit(agent, ask.tool_calls[0], {"user_id": "alice", "order_id": "o-1", "amount": 60.0})
    event = UserConfirmResultEvent(reply_id=ask.reply_id,
                                   confirm_results=[ConfirmResult(confirmed=True, tool_call=edited)])
    await reply(h, agent, ALICE, event)
    assert RAN == ["refund:alice:o-1:60.0"]
    assert h.last_report(agent).terminal_state == TerminalState.COMPLETED


async def test_an_edit_is_still_judged_by_every_gate() -> None:
    h = shop()
    model, agent, ask = await parked_refund(h)
    with h.acting_for(ALICE):
        edited = h.approve_edit(agent, ask.tool_calls[0], {"user_id": "bob", "order_id": "o-1", "amount": 60.0})
    event = UserConfirmResultEvent(reply_id=ask.reply_id,
                                   confirm_results=[ConfirmResult(confirmed=True, tool_call=edited)])
    await reply(h, agent, ALICE, event)
    assert RAN == [] and h.last_report(agent).refusals == {"permission_denied": 1}


async def test_a_denied_confirmation_never_runs_the_call() -> None:
    h = shop()
    model, agent, ask = await parked_refund(h)
    await reply(h, agent, ALICE, confirm(ask, confirmed=False))
    assert RAN == []
    assert "denied by user" in _denied_text(model)


# ---------------------------------------------------- remembered approvals

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_remembered_approval_skips_the_ask_within_its_scope_and_expires() -> None:
    h = shop()
    clock = Clock()
    h.services.approvals.clock = clock
    model = ScriptedModel([refund_call(60.0, order="o-1"), text("one")])
    agent = make_agent(model, [refund], h.middlewares())
    session = agent.state.session_id
    h.approve(ALICE, session, "refund", when=lambda a: a["amount"] < 100, ttl_s=60)

    assert asked(await reply(h, agent, ALICE)) is None
    report = h.last_report(agent)
    assert RAN == ["refund:alice:o-1:60.0"]
    assert [d.action for d in report.decisions if d.tool == "refund"][-1] == "allow_remembered"

    model.script = [refund_call(500.0, order="o-2"), text("two")]  # outside `when`
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None
    await reply(h, agent, ALICE, confirm(ask, confirmed=False))

    other = make_agent(ScriptedModel([refund_call(60.0, user="bob"), text("x")]), [refund], h.middlewares())
    assert asked(await reply(h, other, BOB)) is not None  # another principal and session

    model.script = [refund_call(70.0, order="o-3"), text("three")]
    clock.now += 61
    assert asked(await reply(h, agent, ALICE)) is not None  # expired
    assert RAN == ["refund:alice:o-1:60.0"]


async def test_a_remembered_approval_is_per_session_and_revocable() -> None:
    h = shop()
    model = ScriptedModel([refund_call(60.0), text("one")])
    agent = make_agent(model, [refund], h.middlewares())
    h.approve(ALICE, "another-session", "refund", ttl_s=60)
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None
    await reply(h, agent, ALICE, confirm(ask, confirmed=False))
    h.approve(ALICE, agent.state.session_id, "refund", ttl_s=60)
    h.revoke(ALICE, agent.state.session_id)
    model.script = [refund_call(61.0), text("two")]
    assert asked(await reply(h, agent, ALICE)) is not None
    with pytest.raises(ValueError):
        h.approve(ALICE, None, "refund", ttl_s=0)


# ------------------------------------------------------- budget extensions

async def test_a_call_of_more_units_than_are_left_is_told_so_and_offered_its_units() -> None:
    """Round 176 b: `Ledger(cap=3, extend_by=1)`, `search` spends 2 units: after one call
    (2/3) the next asked "(2/3) is used up" while 1 unit was left. The question says what is
    left and what the call takes, and offers the larger of `extend_by` and the call's units;
    a yes extends by that, and the call runs."""
    h = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"], units=2)},
        ledgers={"retrieval": Ledger(cap=3, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    ask = asked(await reply(h, agent, ALICE))
    parked = h.last_report(agent)
    assert ask is not None and RAN == ["a"], RAN
    assert parked.reason == "the retrieval quota (2/3) has 1 left, this call takes 2; approve to extend it by 2"
    ask = asked(await reply(h, agent, ALICE, confirm(ask)))
    report = h.last_report(agent)
    assert RAN == ["a", "b"] and report.extensions == [{"what": "ledger:retrieval", "by": 2, "approved_by": "alice"}]
    assert ask is not None and report.reason == "the retrieval quota (4/5) has 1 left, this call takes 2; approve to extend it by 2"


async def test_a_yes_runs_the_call_when_its_batch_spent_what_was_left() -> None:
    """Round 176 d: a ledger at 1/2 (`extend_by=1`), a batch of a 2-unit call and a 1-unit
    call: the first is asked about, the second fits and spends the last unit. Offering only
    what the first lacked (1) left its yes refused `quota_exhausted`, the extension recorded.
    "A yes answers what the question said": it runs."""
    async def small(q: str) -> str:
        """Small.

        Args:
            q (str): q.
        """
        RAN.append(f"small:{q}")
        return q

    h = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["q"], units=2),
               "small": ToolPolicy(role="retrieval", ledgers=["q"], units=1)},
        ledgers={"q": Ledger(cap=2, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False)
    model = ScriptedModel([calls(("small", {"q": "a"})), calls(("search", {"q": "b"}), ("small", {"q": "c"})),
                           text("done"), text("done")])
    agent = make_agent(model, [search, tool(small)], h.middlewares())
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None and RAN == ["small:a", "small:c"], RAN
    await reply(h, agent, ALICE, confirm(ask))
    report = h.last_report(agent)
    assert RAN == ["small:a", "small:c", "b"] and not report.refusals, (RAN, report.refusals)
    assert report.extensions == [{"what": "ledger:q", "by": 2, "approved_by": "alice"}], report.extensions


async def test_an_exhausted_ledger_asks_and_an_approval_extends_it() -> None:
    h = shop()
    model = ScriptedModel([
        calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), calls(("search", {"q": "c"})),
        calls(("search", {"q": "d"})), text("done"),
    ])
    agent = make_agent(model, [search], h.middlewares())
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None and RAN == ["a"]
    parked = h.last_report(agent)
    assert parked.terminal_state == TerminalState.WAITING_INPUT
    assert parked.reason == "the retrieval quota (1/1) is used up; approve to extend it by 2"
    assert parked.extensions == []

    await reply(h, agent, ALICE, confirm(ask))
    report = h.last_report(agent)
    assert RAN == ["a", "b", "c"]  # the extension: two more units
    assert report.extensions == [{"what": "ledger:retrieval", "by": 2, "approved_by": "alice"}]
    assert report.terminal_state == TerminalState.WAITING_INPUT  # d asks again
    assert "(3/3)" in report.reason


async def test_an_extension_refused_by_the_human_is_not_granted() -> None:
    h = shop()
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    ask = asked(await reply(h, agent, ALICE))
    await reply(h, agent, ALICE, confirm(ask, confirmed=False))
    report = h.last_report(agent)
    assert RAN == ["a"] and report.extensions == []
    assert report.terminal_state == TerminalState.COMPLETED


async def test_a_remembered_approval_never_covers_an_extension() -> None:
    h = shop()
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    h.approve(ALICE, agent.state.session_id, "search", ttl_s=60)
    assert asked(await reply(h, agent, ALICE)) is not None and RAN == ["a"]


async def _two_searches_on_a_budget(cap_usd: float, usd_per_call: float) -> tuple[Harness, Any, Any, Any, Any]:
    """Alice's reply of two searches, each call ``usd_per_call``, all of it
    output (10 tokens: the request's own estimate costs nothing), under a
    ``cap_usd`` that asks: (harness, model, agent, final message, report)."""
    cost = CostPolicy(cap_usd=cap_usd, prices={"scripted": (0.0, usd_per_call * 100_000)}, on_exhausted="ask")
    h = Harness(HarnessConfig(cost=cost), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("late")])
    agent = make_agent(model, [tool(search)], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent)
    return h, model, agent, final, h.last_report(agent)


async def test_an_exhausted_usd_budget_asks_and_an_extension_continues_it() -> None:
    h, model, agent, final, report = await _two_searches_on_a_budget(1.3, 0.6)
    assert report.terminal_state == TerminalState.WAITING_INPUT
    assert "approve an extension" in report.reason
    assert "Shall I continue?" in final.get_text_content()
    assert len(model.calls) == 2  # $1.20 spent: a third ($0.60) would pass $1.30
    # the question is an ask decision, as a call's is (round 179: enforcing recorded only the stop)
    assert [(d.hook, d.point) for d in report.decisions if d.action == "ask"] == [("budget_router", "on_model_call")]

    with h.acting_for(ALICE):  # another message is not a way around the budget
        _, again = await run(agent, "go on")
    assert h.last_report(agent).terminal_state == TerminalState.WAITING_INPUT
    assert len(model.calls) == 2

    with h.acting_for(ALICE):
        h.extend(agent, usd=1.0)
        _, final = await run(agent, "yes, continue")
    report = h.last_report(agent)
    assert len(model.calls) == 3 and final.get_text_content() == "late"
    assert report.extensions == [{"what": "usd", "by": 1.0, "approved_by": "alice"}]
    assert report.terminal_state == TerminalState.COMPLETED


async def test_a_budget_spent_to_the_ladders_last_rung_asks_with_an_ask_decision() -> None:
    """Round 179 (scenario s179d): a budget whose policy asks, left at its
    last tier (4 % of $1.00 after two $0.48 calls), ends ``waiting_input``
    at ``pre_think`` with its question; the question is an ``ask`` decision
    of ``budget_router``, as in shadow mode (enforcing recorded only the stop)."""
    _, model, _, final, report = await _two_searches_on_a_budget(1.0, 0.48)
    assert report.terminal_state == TerminalState.WAITING_INPUT and len(model.calls) == 2
    assert "Shall I continue?" in final.get_text_content()
    assert [(d.hook, d.point) for d in report.decisions if d.action == "ask"] == [("budget_router", "pre_think")]


async def test_extend_needs_a_run_waiting_on_its_budget() -> None:
    h = Harness(load_entry_points=False)
    agent = make_agent(ScriptedModel([text("x")]), [search], h.middlewares())
    with pytest.raises(ValueError):
        h.extend(agent, usd=1.0)
    await agent.reply(UserMsg("user", "hi"))


async def test_a_confirmation_prompt_carries_the_real_arguments_and_the_app_redacts_what_it_shows() -> None:
    """README (Secrets): the confirmation event is AgentScope's control
    channel: it carries the arguments the call will run with, echoing it back
    runs exactly those, and ``harness.redactor`` is what the application
    renders for the user."""
    key = "sk-" + "A1b2C3d4" * 5
    h = shop()
    model = ScriptedModel([
        calls(("refund", {"user_id": "alice", "order_id": key, "amount": 80.0})),
        text("done"),
    ])
    agent = make_agent(model, [refund, search], h.middlewares())
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None and RAN == []
    shown = h.redactor.redact(ask.tool_calls[0].input)
    assert key not in shown and "[redacted:openai_key]" in shown
    await reply(h, agent, ALICE, confirm(ask))
    assert RAN == [f"refund:alice:{key}:80.0"]  # the real arguments ran, not the redacted ones


@pytest.mark.parametrize("confirmed", [True, False])
async def test_a_call_agentscope_asks_about_gives_back_its_slot(confirmed: bool) -> None:
    """AgentScope's own permission engine asks about a call every gate
    passed: the call's concurrency slot is given back while it waits (a
    resume is judged afresh), so the confirmed call runs, and a refused one
    leaves the slot free for the next call of that tool."""
    h = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval")},
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)],
    ), load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")]),
                       [FunctionTool(search), tool(refund)], h.middlewares())  # AgentScope asks by default
    ask = asked(await reply(h, agent, ALICE))
    assert ask is not None and RAN == []
    events = await reply(h, agent, ALICE, confirm(ask, confirmed=confirmed))
    report = h.last_report(agent)
    assert "concurrency_limited" not in report.refusals
    if confirmed:
        assert RAN == ["a"]
    else:  # the model's next call is asked about in turn, not refused for a slot
        assert RAN == [] and asked(events) is not None


async def test_a_reason_that_quotes_the_call_is_reported_redacted() -> None:
    """An ``ask_when`` reason quoting the arguments: the run's report (its
    reason, the ``harness.report`` event, ``last_report``) states it with
    secrets and personal data redacted, as decision details are."""
    key = "sk-" + "A1b2C3d4" * 5

    def quoting(args: dict[str, Any]) -> str:
        return f"refund of {args['order_id']} for {args['user_id']} needs a human"

    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, ask_when=quoting),
    }), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"user_id": "alice", "order_id": key, "amount": 80.0})), text("done")])
    agent = make_agent(model, [refund], h.middlewares())
    events = await reply(h, agent, ALICE)
    assert asked(events) is not None
    report = h.last_report(agent)
    assert report.terminal_state == TerminalState.WAITING_INPUT
    assert report.reason == "refund of [redacted:openai_key] for alice needs a human"
    told = [e for e in events if not isinstance(e, RequireUserConfirmEvent)]  # the control channel carries it
    assert key not in json.dumps([e.model_dump(mode="json") for e in told], default=str)


@pytest.mark.parametrize("failure", [RuntimeError, "cancelled"])
async def test_an_approval_rule_that_fails_asks_a_human(failure: Any) -> None:
    """Fail closed: a rule that raises asks. One that raises a cancellation
    of its own (it awaited a task someone else cancelled) too (red team: it
    escaped as the caller's cancellation and AgentScope asked the
    permission again, forever)."""
    import asyncio

    async def rule(args: dict[str, Any]) -> str | None:
        if failure == "cancelled":
            shared = asyncio.ensure_future(asyncio.sleep(30))
            shared.cancel()
            await shared
        raise failure("backend down")

    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", ask_when=rule)}), load_entry_points=False)
    agent = make_agent(ScriptedModel([refund_call(), text("done")]), [refund], h.middlewares())
    events = await asyncio.wait_for(reply(h, agent, ALICE), 10)
    assert asked(events) is not None and RAN == []
    assert h.last_report(agent).terminal_state == TerminalState.WAITING_INPUT


@pytest.mark.parametrize("tool_adapter_only", [False, True])
async def test_a_sub_agent_resumed_by_its_leads_run_acts_for_the_principal_it_inherited(tool_adapter_only: bool) -> None:
    """Red team (third pass): the lead's stream was read on outside
    ``acting_for`` after its first step, so the sub-agent had inherited the
    lead's principal when it opened; resumed by the lead's next tool, it was
    taken for a resume by nobody and acted for nobody. The resumer is found
    as the opener was: the bound principal, else the live run resuming it."""
    h = shop()
    adapters = h.middlewares()[1:] if tool_adapter_only else h.middlewares()  # fourth pass: the tool adapter alone
    sub = make_agent(ScriptedModel([refund_call(), text("sub: refunded")]), [refund], adapters, name="sub")
    delegate, resume, _ = parking_tools(sub)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), calls(("resume", {"task": "go"})),
                                     text("lead done")]), [delegate, resume], h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        stream = lead.reply_stream(UserMsg("user", "hi"))
        await stream.__anext__()
    _ = [e async for e in stream]  # read on with nobody bound here
    assert RAN == ["refund:alice:o-1:80.0"]


def test_a_parked_or_settled_run_lends_no_identity() -> None:
    """Red team (fifth pass): a tool-adapter-only sub-agent called, with
    nobody bound, from a task still holding a parked run's handle took that
    run's principal (a parked run carries a provisional report). Only a live
    run lends its caller's identity, as when the agent adapter opens a
    nested run."""
    from agentscope_harness.run_state import RUN_HANDLE

    h = shop()
    run = h.table.open("r-1", "lead", "s-1", ALICE, None, None, "enforce")
    token = RUN_HANDLE.set(run.handle)
    try:
        assert h.caller_principal() == ALICE
        run.report = object()  # a provisional report: parked
        assert h.caller_principal() is None
    finally:
        RUN_HANDLE.reset(token)


def test_rules_hidden_for_overlapping_judgements_of_two_principals_all_come_back() -> None:
    """Alice's call and Bob's are judged at once on one permission context:
    each is judged without the rules the other principals gave (Carol's
    hidden for Alice, Alice's and Carol's for Bob), and every rule is back,
    in its order, once the last judgement ends."""
    from types import SimpleNamespace

    from agentscope.permission import PermissionBehavior, PermissionContext, PermissionRule

    from agentscope_harness.approvals import ApprovalBook

    def rule(tool: str) -> PermissionRule:
        return PermissionRule(tool_name=tool, rule_content=None, behavior=PermissionBehavior.ALLOW, source="session")

    context = PermissionContext()
    app_rule, alices, carols = rule("refund"), rule("refund"), rule("lookup")
    context.allow_rules.update({"refund": [app_rule, alices], "lookup": [carols]})
    agent = SimpleNamespace(_engine=SimpleNamespace(context=context))
    book = ApprovalBook()
    carol = Principal(user_id="carol", tenant="acme")
    book.rules_given(agent, [alices], ALICE)
    book.rules_given(agent, [carols], carol)
    with book.only_rules_of(agent, ALICE):
        assert context.allow_rules == {"refund": [app_rule, alices], "lookup": []}
        with book.only_rules_of(agent, BOB):
            assert context.allow_rules == {"refund": [app_rule], "lookup": []}
        assert context.allow_rules["refund"] == [app_rule]  # Bob's judgement still counted until Alice's ends
    assert context.allow_rules == {"refund": [app_rule, alices], "lookup": [carols]}

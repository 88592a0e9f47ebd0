"""sequencing.py: sequence_gate; and a whole shopping run end to end."""

from __future__ import annotations

from hookkit import Ran, drive, harnessed, results, shop_tools
from scripted import calls, text

from agentscope_harness import HarnessConfig, Prerequisite, Principal, ToolPolicy

U42 = Principal(user_id="u-42", tenant="acme")
ID = {"user_id": "user_id"}


def order_config(**kw) -> HarnessConfig:
    return HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup", identity_args=ID),
            "cancel_order": ToolPolicy(
                role="mutation", identity_args=ID,
                requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])],
                claims=[r"\bcancell?ed\b"],
            ),
            "submit": ToolPolicy(role="finish"),
        },
        **kw,
    )


def order(tool: str, order_id: str, user: str = "u-42"):
    return calls((tool, {"order_id": order_id, "user_id": user}))


async def test_cancel_without_lookup_is_refused_and_never_escapes():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        order_config(max_enforce_retries=0),
        [order("cancel_order", "o1"), order("cancel_order", "o1"), order("cancel_order", "o1"),
         text("I need to look it up first.")],
        [t["lookup_order"], t["cancel_order"], t["submit"]],
    )
    _, _, report = await drive(h, agent, U42)
    msgs = results(model)
    assert all(m.startswith("[harness:prerequisite_missing]") for m in msgs[:2])
    assert 'Call lookup_order for order_id="o1" first' in msgs[0]
    assert ran == []
    # refused again: constrained; trying a third time ends the run
    assert len(model.calls) == 3 and model.calls[2]["tool_choice"].mode == "submit"
    assert report.refusals == {"prerequisite_missing": 2, "run_concluded": 1}
    assert report.reason == "refused:prerequisite_missing"
    assert report.tool_calls == {}


async def test_a_lookup_in_the_same_turn_as_the_cancel_does_not_satisfy_it():
    # the model has not read the lookup's result when it asks for the cancel
    ran = Ran()
    t = shop_tools(ran)
    both = calls(("lookup_order", {"order_id": "o1", "user_id": "u-42"}),
                 ("cancel_order", {"order_id": "o1", "user_id": "u-42"}))
    h, model, agent = harnessed(
        order_config(),
        [both, order("cancel_order", "o1"), calls(("submit", {"answer": "o1 cancelled"})), text("done")],
        [t["lookup_order"], t["cancel_order"], t["submit"]],
    )
    _, _, report = await drive(h, agent, U42)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]")
    assert [name for name, _ in ran] == ["lookup_order", "cancel_order", "submit"]
    assert report.refusals == {"prerequisite_missing": 1}
    assert report.tool_calls == {"lookup_order": 1, "cancel_order": 1, "submit": 1}


async def test_cancel_needs_a_lookup_of_that_very_order():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        order_config(),
        [order("lookup_order", "o1"), order("cancel_order", "o2"), order("cancel_order", "o1"),
         calls(("submit", {"answer": "o1 cancelled"})), text("Order o1 is cancelled.")],
        [t["lookup_order"], t["cancel_order"], t["submit"]],
    )
    _, _, report = await drive(h, agent, U42)
    msgs = results(model)
    assert msgs[1].startswith("[harness:prerequisite_missing]") and '"o2"' in msgs[1]
    assert "order o1 cancelled" in msgs[2]
    assert ran.of("cancel_order") == [{"order_id": "o1", "user_id": "u-42"}]
    assert report.refusals == {"prerequisite_missing": 1}
    assert report.terminal_state.value == "completed"


async def test_a_failed_lookup_is_no_prerequisite():
    ran = Ran()
    t = shop_tools(ran)

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order of a user.

        Args:
            order_id (str): The order.
            user_id (str): The user.
        """
        ran.append(("lookup_order", {"order_id": order_id}))
        raise LookupError(f"no order {order_id}")

    h, model, agent = harnessed(
        order_config(max_enforce_retries=0),
        [order("lookup_order", "o1"), order("cancel_order", "o1"), text("not found")],
        [lookup_order, t["cancel_order"], t["submit"]],
    )
    _, _, report = await drive(h, agent, U42)
    msgs = results(model)
    assert "no order o1" in msgs[0]
    assert msgs[1].startswith("[harness:prerequisite_missing]")
    assert ran.of("cancel_order") == []


async def test_a_lookup_from_an_earlier_run_does_not_count():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        order_config(require_finish_tool=False),
        [order("lookup_order", "o1"), text("found it"),
         order("cancel_order", "o1"), text("sorry")],
        [t["lookup_order"], t["cancel_order"], t["submit"]],
    )
    await drive(h, agent, U42)
    _, _, report = await drive(h, agent, U42)
    assert results(model)[-1].startswith("[harness:prerequisite_missing]")
    assert ran.of("cancel_order") == []
    assert report.refusals == {"prerequisite_missing": 1}


async def test_shopping_order_run_completes_end_to_end():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        order_config(max_tool_calls=10, deadline_s=30),
        [order("lookup_order", "o-77"),
         order("cancel_order", "o-77"),
         calls(("submit", {"answer": "Your order o-77 has been cancelled."})),
         text("never asked for")],
        [t["lookup_order"], t["cancel_order"], t["submit"]],
    )
    events, final, report = await drive(h, agent, U42, "cancel my last order")
    assert [name for name, _ in ran] == ["lookup_order", "cancel_order", "submit"]
    assert final.get_text_content() == "Your order o-77 has been cancelled."
    assert report.terminal_state.value == "completed"
    assert report.reason == "finished"
    assert report.refusals == {}
    assert report.tool_calls == {"lookup_order": 1, "cancel_order": 1, "submit": 1}
    assert report.unsupported_claims == []
    assert report.model_calls == 3  # none after the finish tool
    assert report.principal["user_id"] == "u-42"
    assert len(h.table) == 0
    for msg in results(model):
        assert "[harness:" not in msg


# ------------------------------------- a prerequisite the client executes


def _client_verified_refunds(ran: Ran, script: list, **config) -> tuple:
    """``verify_code`` runs on the client; ``refund`` requires it."""
    from agentscope.tool import Toolkit
    from scripted import ScriptedModel, client_tool, make_agent, tool

    from agentscope_harness import Harness

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    policy = ToolPolicy(role="mutation", requires=[Prerequisite(tool="verify_code")])
    h = Harness(HarnessConfig(tools={"refund": policy}, **config), load_entry_points=False)
    model = ScriptedModel(script)
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool(), tool(refund)])), h.middlewares())
    return h, agent, model


async def _answer_the_client_call(h, agent, state: str = "success") -> list:
    """The reply parks on the client's call; the client answers it in
    ``state``. The events of the resumed reply."""
    from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
    from agentscope.message import ToolResultBlock, UserMsg

    with h.acting_for(U42):
        events = [e async for e in agent.reply_stream(UserMsg("user", "refund A-1, code 1234"))]
        asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        done = ToolResultBlock(id=asked.id, name=asked.name, output="code checked", state=state)
        return [e async for e in agent.reply_stream(ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                                                 execution_results=[done]))]


async def test_a_prerequisite_the_client_answered_counts_for_the_next_turn_of_the_same_reply():
    """The client's answer arrives before the model's next turn: the model
    has read it when it asks for the refund (AgentScope's round counter does
    not move across that resume; the harness counts the model's turns)."""
    ran = Ran()
    h, agent, model = _client_verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"})), calls(("refund", {"order_id": "A-1"})), text("Refunded A-1."),
    ])
    await _answer_the_client_call(h, agent)
    assert ran == [("refund", {"order_id": "A-1"})]
    report = h.last_report(agent)
    assert report.refusals == {} and report.terminal_state.value == "completed"


async def test_a_prerequisite_the_client_answered_does_not_count_for_a_call_of_its_own_turn():
    """Asked for in the same model turn as the client's call, the refund was
    chosen before the model read the code's check: still refused."""
    ran = Ran()
    h, agent, model = _client_verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"}), ("refund", {"order_id": "A-1"})), text("Could not refund."),
    ])
    await _answer_the_client_call(h, agent)
    assert ran == []
    assert h.last_report(agent).refusals == {"prerequisite_missing": 1}


async def test_a_client_call_answered_as_interrupted_frees_its_concurrency_slot():
    """The client says its call was interrupted: the harness no longer waits
    on it, so the tool's one slot is free for the model's next try (the
    report still lists the call in flight: its effect is unknown)."""
    from agentscope.event import RequireExternalExecutionEvent

    from agentscope_harness import ConcurrencyLimit

    ran = Ran()
    h, agent, model = _client_verified_refunds(ran, [
        calls(("verify_code", {"code": "1234"})), calls(("verify_code", {"code": "1234"})), text("asked again"),
    ], concurrency_limits=[ConcurrencyLimit(scope="tool", tool="verify_code", max_in_flight=1)])
    events = await _answer_the_client_call(h, agent, "interrupted")
    assert any(isinstance(e, RequireExternalExecutionEvent) for e in events)  # asked again, not refused
    report = h.last_report(agent)
    assert "concurrency_limited" not in report.refusals
    assert [c for c in report.in_flight if c.startswith("verify_code:")]

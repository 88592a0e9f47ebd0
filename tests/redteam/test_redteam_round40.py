"""Round 40: three helpers wrote the scenarios a team writes in its first week
(security and honesty; stopping and spend on the real client; the extension
API and operations). Each break they found, held here.

- a true answer about an earlier reply's action was "corrected" into a false one;
- a claim naming its call (``claims`` with named groups) is held to that call;
- a text answer around a required finishing tool (and its ``verify``) was given;
- ``secret_env`` values set or rotated after construction leaked;
- the same user resuming their own approval from a new request was refused;
- ``ctx.stop`` in a ``pre_tool_call`` gate ended the run but its call still ran;
- the candidate ignored ``ask_when``; ``diff-policy`` counted runs twice;
- a hook cut at the run's deadline was reported as cut at ``hook_timeout_s``;
- ``tokens_per_min`` counted every call's worst case, never the tokens used.
"""

from __future__ import annotations

import json

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from hookkit import streamed
from scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, payload_bytes, run, text

from agentscope_harness import (
    Harness,
    HarnessConfig,
    Prerequisite,
    Principal,
    RateLimit,
    TerminalState,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.cli import diff_summary

RAN: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order. Args: order_id (str): The order. user_id (str): Its owner."""
    RAN.append(("lookup", order_id))
    return f"order {order_id} of {user_id}: paid"


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order. Args: order_id (str): The order. user_id (str): Its owner."""
    RAN.append(("cancel", order_id))
    return f"order {order_id} cancelled"


async def refund(order_id: str, amount: float) -> str:
    """Refund an order. Args: order_id (str): The order. amount (float): USD."""
    RAN.append(("refund", order_id))
    return f"refunded {order_id}"


async def submit_answer(answer: str) -> str:
    """Deliver the final answer. Args: answer (str): The answer."""
    RAN.append(("submit", answer))
    return "ok"


def shop(claim: str = r"\bcancell?ed\b", **kw: object) -> Harness:
    return Harness(HarnessConfig(tools={
        "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
        "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, claims=[claim],
                                   requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])]),
    }, **kw), load_entry_points=False)  # type: ignore[arg-type]


def lookup(order: str) -> object:
    return calls(("lookup_order", {"order_id": order, "user_id": "u-42"}))


def cancel(order: str) -> object:
    return calls(("cancel_order", {"order_id": order, "user_id": "u-42"}))


# ------------------------------------------------------------------ claims


@pytest.mark.parametrize("stream", [False, True])
async def test_a_true_answer_about_an_earlier_replys_action_stands(stream: bool) -> None:
    h = shop()
    model = ScriptedModel([lookup("A-1"), cancel("A-1"), text("Done: A-1 is cancelled."),
                           text("Yes, order A-1 was cancelled a moment ago.")], stream=stream)
    agent = make_agent(model, [lookup_order, cancel_order], h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "cancel A-1"))
        assert h.last_report(agent).terminal_state == TerminalState.COMPLETED
        items = await drain(agent, UserMsg("user", "did that work?"))
    assert RAN == [("lookup", "A-1"), ("cancel", "A-1")]  # it did work, in the first reply
    report = h.last_report(agent)
    assert items[-1].get_text_content() == "Yes, order A-1 was cancelled a moment ago."
    assert (report.terminal_state, report.unsupported_claims) == (TerminalState.COMPLETED, [])


async def test_an_earlier_reply_whose_call_was_refused_supports_no_claim() -> None:
    h = shop()
    model = ScriptedModel([cancel("A-1"), text("I could not do that."),
                           text("Order A-1 was cancelled earlier.")])
    agent = make_agent(model, [lookup_order, cancel_order], h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "cancel A-1"))  # refused: no lookup first
        items = await drain(agent, UserMsg("user", "so is it cancelled?"))
    assert RAN == []
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")
    assert "did not succeed" in items[-1].get_text_content()


NAMED = r"\border (?P<order_id>[A-Z]-\d+) (?:was |is |has been )?cancell?ed\b"


async def test_a_claim_naming_its_call_stands_only_for_the_calls_that_succeeded() -> None:
    h = shop(NAMED)
    model = ScriptedModel([lookup("A-1"), cancel("A-1"), cancel("A-2"),  # no lookup, refused
                           text("Order A-1 was cancelled and order A-2 was cancelled.")])
    agent = make_agent(model, [lookup_order, cancel_order], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent)
    report = h.last_report(agent)
    assert ("cancel", "A-2") not in RAN and report.refusals == {"prerequisite_missing": 1}
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")
    assert "A-2 was cancelled" not in final.get_text_content()
    detail = next(d.detail for d in report.decisions if d.action == "unsupported_claim")
    assert detail.endswith("never succeeded with those arguments")


async def test_a_claim_naming_calls_that_all_succeeded_stands() -> None:
    h = shop(NAMED)
    model = ScriptedModel([lookup("A-1"), lookup("A-2"), cancel("A-1"), cancel("A-2"),
                           text("Order a-1 was cancelled and order A-2 has been cancelled.")])
    agent = make_agent(model, [lookup_order, cancel_order], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent)
    assert h.last_report(agent).terminal_state == TerminalState.COMPLETED
    assert final.get_text_content() == "Order a-1 was cancelled and order A-2 has been cancelled."


# ------------------------------------------------------- finishing tool


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_answer_around_the_finishing_tool_is_neither_shown_nor_given(stream: bool) -> None:
    h = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}), load_entry_points=False)
    model = ScriptedModel([text("FIRST made-up answer."), text("SECOND made-up answer.")], stream=stream)
    agent = make_agent(model, [submit_answer], h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "q"))
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "finish_tool_not_called")
    final, shown = items[-1].get_text_content(), streamed(items[:-1])
    assert "made-up" not in shown and "made-up" not in final
    assert final.startswith("I could not complete this request (it did not deliver its result")
    assert shown.endswith(final)  # the stream shows what the user receives


# --------------------------------------------------------------- secrets


NEW_SECRET = "new-db-passw0rd-2222"


@pytest.mark.parametrize("before", [None, "old-db-passw0rd-1111"])
async def test_a_secret_env_value_set_after_construction_is_redacted(
    monkeypatch: pytest.MonkeyPatch, before: str | None,
) -> None:
    if before is None:
        monkeypatch.delenv("DB_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("DB_PASSWORD", before)
    h = Harness(HarnessConfig(secret_env=["DB_PASSWORD"]), load_entry_points=False)
    monkeypatch.setenv("DB_PASSWORD", NEW_SECRET)  # a .env loaded later, or a rotation

    async def db_status(name: str) -> str:
        """DB status. Args: name (str): The database."""
        return f"db {name} up; connected with {NEW_SECRET} (was {before})"

    model = ScriptedModel([calls(("db_status", {"name": "main"})), text(f"Connected with {NEW_SECRET}.")],
                          stream=True)
    agent = make_agent(model, [db_status], h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "status"))
    told = payload_bytes(model.calls[-1])
    assert NEW_SECRET not in told and NEW_SECRET not in streamed(items[:-1])
    assert NEW_SECRET not in items[-1].get_text_content()
    if before is not None:  # the rotated-out value is still a secret
        assert before not in told


# ------------------------------------------------------------------ HITL


@pytest.mark.parametrize(("resumer", "runs"), [
    (Principal(user_id="alice", tenant="acme", request_id="req-2"), True),  # her next request
    (Principal(user_id="mallory", tenant="acme", request_id="req-1"), False),  # another user
])
async def test_a_resume_is_the_same_caller_by_tenant_and_user(resumer: Principal, runs: bool) -> None:
    policy = ToolPolicy(role="mutation", ask_when=lambda a: "big" if a["amount"] > 50 else None)
    h = Harness(HarnessConfig(tools={"refund": policy}), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 80.0})), text("Refunded.")])
    agent = make_agent(model, [refund], h.middlewares())
    with h.acting_for(Principal(user_id="alice", tenant="acme", request_id="req-1")):
        events, _ = await run(agent)
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    with h.acting_for(resumer):
        await run(agent, inputs=confirm(ask, ask.tool_calls[0]))
    report = h.last_report(agent)
    assert RAN == ([("refund", "A-1")] if runs else [])
    assert report.reason == ("answered" if runs else "refused:permission_denied")


# ---------------------------------------------------- extension and ops


@harness_hook("pre_tool_call", priority=25, name="fraud_stop", kind="safety")
def fraud_stop(ctx: object) -> None:
    if ctx.tool.name == "refund" and ctx.tool.args["amount"] > 1000:  # type: ignore[attr-defined]
        ctx.stop("fraud_suspected", text="This request was stopped for review.")  # type: ignore[attr-defined]


async def test_a_gate_that_stops_the_run_refuses_its_own_call() -> None:
    h = Harness(HarnessConfig(), hooks=[fraud_stop], load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 5000}),
                                 ("refund", {"order_id": "A-2", "amount": 5})),
                           text("Refunded both."), text("x")])
    agent = make_agent(model, [refund], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert RAN == []  # neither the stopped call nor its batch's next one
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "fraud_suspected")
    assert report.refusals == {"run_concluded": 2} and report.tool_calls == {}
    assert final.get_text_content() == "This request was stopped for review."


ASK = lambda args: "refunds over $50 need a human" if args["amount"] > 50 else None  # noqa: E731


@pytest.mark.parametrize("live_asks", [False, True])
async def test_the_candidate_judges_ask_when(live_asks: bool) -> None:
    asking, plain = ToolPolicy(role="mutation", ask_when=ASK), ToolPolicy(role="mutation")
    live, candidate = (asking, plain) if live_asks else (plain, asking)
    h = Harness(HarnessConfig(tools={"refund": live}), candidate=HarnessConfig(tools={"refund": candidate}),
                load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 80})), text("Refunded A-1.")])
    agent = make_agent(model, [refund], h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent)
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events) is live_asks  # live unchanged
    assert RAN == ([] if live_asks else [("refund", "A-1")])
    (difference,) = h.last_report(agent).candidate_differences
    assert (difference["live"], difference["candidate"]) == (("ask", "allow") if live_asks else ("allow", "ask"))


async def test_diff_policy_counts_each_run_once() -> None:
    diff = {"point": "pre_tool_call", "tool": "refund", "live": "ask", "candidate": "allow"}
    child = {"run_id": "sub-1", "candidate_differences": [diff]}
    lines = [
        json.dumps(child),  # the sub-agent's own report ...
        json.dumps({"run_id": "lead", "candidate_differences": [], "children": [child]}),  # ... nested again
        json.dumps({"run_id": "parked", "terminal_state": "waiting_input", "candidate_differences": [diff]}),
        json.dumps({"run_id": "parked", "terminal_state": "completed", "candidate_differences": [diff, diff]}),
    ]
    summary = diff_summary(lines)
    assert (summary["runs"], summary["runs_with_differences"], summary["differences"]) == (3, 2, 3)


async def test_a_hook_cut_at_the_deadline_says_so() -> None:
    import asyncio

    @harness_hook("pre_tool_call", priority=25, name="slow_gate", kind="safety")
    async def slow_gate(ctx: object) -> None:
        await asyncio.sleep(5)

    h = Harness(HarnessConfig(deadline_s=0.5, hook_timeout_s=5), hooks=[slow_gate], load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 5})), text("x")])
    agent = make_agent(model, [refund], h.middlewares())
    await run(agent)
    errors = [d.detail for d in h.last_report(agent).decisions if d.action == "error"]
    assert errors == ["timed out at the run's deadline"] and RAN == []


async def replies_under_10k_tokens_a_minute(inp: int, out: int, replies: int) -> list[tuple[str, int]]:
    """Replies of one call billed ``inp`` + ``out`` tokens, one after another
    under ``tokens_per_min=10_000``: (reason, tokens billed) of each."""
    h = Harness(HarnessConfig(rate_limits=[RateLimit(scope="principal", tokens_per_min=10_000)]),
                load_entry_points=False)
    outcomes = []
    for i in range(replies):
        model = ScriptedModel([text(f"Answer {i}.", inp=inp, out=out)])
        agent = make_agent(model, [refund], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent)
        report = h.last_report(agent)
        outcomes.append((report.reason, report.input_tokens + report.output_tokens))
    return outcomes


async def test_tokens_per_min_counts_the_tokens_the_provider_billed() -> None:
    # each call's worst case is ~4,100 tokens (4,096 of output without max_tokens): five
    # calls of 320 billed tokens fit in 10,000 a minute only if the unused part goes back
    assert await replies_under_10k_tokens_a_minute(300, 20, 5) == [("answered", 320)] * 5


async def test_tokens_per_min_still_limits_what_was_billed() -> None:
    reasons = [reason for reason, _ in await replies_under_10k_tokens_a_minute(3_000, 1_000, 4)]
    assert reasons[:2] == ["answered", "answered"] and "rate_limited" in reasons[2:]


async def test_a_declined_budget_question_lets_the_next_reply_start_afresh() -> None:
    from agentscope_harness import CostPolicy

    async def search(q: str) -> str:
        """Search. Args: q (str): The query."""
        RAN.append(("search", q))
        return f"results for {q}"

    cost = CostPolicy(cap_usd=0.02, prices={"scripted": (10.0, 10.0)}, on_exhausted="ask")
    h = Harness(HarnessConfig(cost=cost), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": str(i)}), inp=500, out=500) for i in range(20)]
                          + [text("Here is a fresh answer.", inp=50, out=5)])
    agent = make_agent(model, [search], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent)
        assert h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
        made = len(model.calls)
        assert made > 0
        await run(agent, "what about something else?")  # no answer to the question: it is asked again
        assert (h.last_report(agent).terminal_state, len(model.calls)) == (TerminalState.WAITING_INPUT, made)
        h.decline(agent)
        with pytest.raises(ValueError, match="no run waiting on its budget"):
            h.decline(agent)
        _, final = await run(agent, "what about something else?")
    assert len(model.calls) > made  # a budget of its own: it works again
    assert not any(d.action == "continue_budget" for d in h.last_report(agent).decisions)

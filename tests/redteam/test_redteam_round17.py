"""Red team, round 17: promises of the README attacked from a user's side.

1. ``max_model_calls`` (run-wide, sub-agents included) under parallel
   sub-agents whose model calls wait on the store, and against AgentScope's
   compression call;
2. honest answers: ``claims`` against a sub-agent's success and against a
   structured output;
3. a reply cancelled while it takes its run slot from the store;
4. raw personal data in a ``RunReport``.

Real ``Agent``s, real tools in real ``Toolkit``s, real stores, the scripted
model of ``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest
from agentscope.agent import ContextConfig
from agentscope.message import ToolCallBlock, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from hookkit import Ran, drive, searcher, shop_tools, structured_reply
from pydantic import BaseModel
from scripted import ScriptedModel, Turn, calls, delegating_tool, make_agent, run, text

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    Principal,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness.stores import MemoryStore, SQLiteStore

U1 = Principal(user_id="u1")

# ====================================================== 1. max_model_calls


def _three_sub_agents(store: Any) -> tuple[Harness, Any, list[ScriptedModel], ScriptedModel]:
    """A lead under ``max_model_calls=2`` whose one model call delegates to
    three sub-agents at once (one parallel batch), all under one Harness
    with a daily quota kept in ``store``."""
    cost = CostPolicy(prices={"c": (1.0, 1.0), "l": (1.0, 1.0)}, daily_quota_usd=100.0)
    h = Harness(HarnessConfig(max_model_calls=2, store=store, cost=cost), load_entry_points=False)
    models, delegates = [], []
    for name in "abc":
        model = ScriptedModel([text(f"{name} done")], model="c")
        models.append(model)
        child = make_agent(model, [searcher(Ran())], h.middlewares(), name=f"child_{name}")
        delegates.append(delegating_tool(child, f"ask_{name}"))
    lead_model = ScriptedModel([calls(*[(f"ask_{n}", {"task": "x"}) for n in "abc"]), text("lead done")], model="l")
    lead = make_agent(lead_model, delegates, h.middlewares(), name="lead")
    return h, lead, models, lead_model


async def test_parallel_sub_agents_waiting_on_a_sqlite_store_stay_within_the_leads_max_model_calls(
    tmp_path: Any,
) -> None:
    """README: "`max_tool_calls` / `max_model_calls` | run-wide, sub-agents
    included (... every enclosing run's caps hold, the strictest wins)";
    "at `max_model_calls` (its own, or that of any run it is nested in ...):
    the fallback answer ... without a model call". The cap is checked only at
    ``pre_think`` (``liveness_watchdog``); ``ModelGuard.call`` then awaits
    ``fleet.before_model_call`` (the daily quota's reservation in a real
    store) before ``add_model_call``, so every parallel sub-agent passes the
    check before any of them is counted."""
    h, lead, models, lead_model = _three_sub_agents(SQLiteStore(str(tmp_path / "q.db")))
    _, final, report = await drive(h, lead, U1)
    served = len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert report.reason == "max_model_calls"
    assert served <= 2 and report.model_calls <= 2


async def test_parallel_sub_agents_on_the_memory_store_stay_within_the_leads_max_model_calls() -> None:
    """The same batch on ``MemoryStore`` (a store call that never yields):
    the cap holds, exactly two model calls."""
    h, lead, models, lead_model = _three_sub_agents(MemoryStore())
    _, final, report = await drive(h, lead, U1)
    assert report.model_calls == 2 == len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert report.terminal_state is TerminalState.INCOMPLETE and report.reason == "max_model_calls"


_SUMMARY_FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps",
                   "context_to_preserve")


def _summarising(kinds: list[str]) -> Any:
    """Answers AgentScope's compression request with a summary; otherwise
    fetches another page."""

    def step(turn: Turn) -> ChatResponse:
        names = [t["function"]["name"] for t in turn.tools or []]
        if "generate_structured_output" in names:
            kinds.append("compression")
            return calls(("generate_structured_output", dict.fromkeys(_SUMMARY_FIELDS, "summary")))
        kinds.append("reasoning")
        return calls(("fetch", {"url": f"u{turn.rounds}"}))

    return step


async def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return f"page {url} " + "lorem ipsum dolor " * 200


async def test_no_compression_call_is_made_once_max_model_calls_is_reached() -> None:
    """README: at `max_model_calls` "the fallback answer ... without a model
    call"; the compression call is a model call the harness bounds, counts
    and charges ("AgentScope's own compression call too"). With
    ``max_model_calls=2``: two reasoning calls, then AgentScope's
    ``compress_context`` (run before ``on_reasoning``, where the cap is
    checked) makes a third call; ``ModelGuard._compression_refusal`` checks
    the deadline, a concluded run, the request cap, the price and the
    budget, never the call cap."""
    kinds: list[str] = []
    h = Harness(HarnessConfig(max_model_calls=2), load_entry_points=False)
    model = ScriptedModel(_summarising(kinds))
    model.context_size = 2500
    agent = make_agent(model, [fetch], h.middlewares(),
                       context_config=ContextConfig(trigger_ratio=0.6, reserve_ratio=0.1))
    await run(agent)
    report = h.last_report(agent)
    assert report.reason == "max_model_calls"
    assert len(model.calls) <= 2 and report.model_calls <= 2, kinds


# ====================================================== 2. honest answers


CANCEL_CLAIM = ToolPolicy(role="mutation", claims=[r"\bcancel+ed\b"])


async def test_an_action_a_sub_agent_really_took_is_not_corrected_as_never_done() -> None:
    """README: "an answer claiming an action that never succeeded is
    corrected"; "the answer claims an action whose tool never succeeded
    (`claims`) | `incomplete` (`unsupported_claim`)". Here the sub-agent
    (same Harness, same principal, a child in the lead's report) cancelled
    A-1; the lead truthfully says so, and the user is told "cancel_order did
    not succeed in this conversation, so that has not been done": a false
    statement that invites cancelling again. ``final_answer_audit`` reads
    ``ctx.facts.has_succeeded(tool)`` of the lead's run only."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    child_model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1", "user_id": "u1"})),
                                 text("Cancelled A-1.")], model="c")
    child = make_agent(child_model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "cancel A-1"})),
                                text("Your order A-1 is cancelled.")], model="l")
    lead = make_agent(lead_model, [delegating_tool(child)], h.middlewares(), name="lead")
    _, final, report = await drive(h, lead, U1)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "user_id": "u1"}]
    assert [c.terminal_state for c in report.children] == [TerminalState.COMPLETED]
    assert "has not been done" not in final.get_text_content()
    assert report.unsupported_claims == []


class Outcome(BaseModel):
    summary: str


def _structured(summary: str) -> ChatResponse:
    return ChatResponse(
        content=[ToolCallBlock(id="out-1", name="GenerateStructuredOutput", input=json.dumps({"summary": summary}))],
        is_last=True, usage=ChatUsage(input_tokens=100, output_tokens=10, time=0.0),
    )


async def test_a_structured_output_claiming_an_action_that_never_ran_is_not_delivered_as_completed() -> None:
    """README: "a run ends `completed` only when its delivery contract holds
    ... an answer claiming an action that never succeeded is corrected";
    the structured output is the answer of a structured reply (it is
    redacted and PII-filtered "as the answer"). The model never calls
    ``cancel_order`` and answers ``{"summary": "Order A-1 cancelled."}``:
    the user receives that output, ``completed`` (``answered``),
    ``unsupported_claims == []``."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    model = ScriptedModel([_structured("Order A-1 cancelled."), text("Order A-1 cancelled.")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, Outcome, "cancel A-1")
    report = h.last_report(agent)
    assert ran == []
    delivered = json.dumps(final.structured_output or {}) + (final.get_text_content() or "")
    claimed = "cancelled" in delivered and "has not been done" not in delivered
    assert not (claimed and report.terminal_state is TerminalState.COMPLETED)
    assert report.unsupported_claims == ["cancel_order"]


async def test_a_finishing_tools_answer_claiming_an_action_that_never_ran_is_corrected() -> None:
    """Regression guard: the finishing tool's answer is audited for claims
    like a text answer."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM, "submit": ToolPolicy(role="finish")}),
                load_entry_points=False)
    model = ScriptedModel([calls(("submit", {"answer": "Order A-1 cancelled."}))], model="m")
    agent = make_agent(model, [tools["cancel_order"], tools["submit"]], h.middlewares(), name="a")
    _, final, report = await drive(h, agent, U1)
    assert "has not been done" in final.get_text_content()
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")


# ====================================================== 3. a cancelled reply's run slot


async def test_a_reply_cancelled_while_taking_its_run_slot_leaves_no_slot_taken(tmp_path: Any) -> None:
    """README: leases are "taken ... at open (runs), renewed while held,
    given back when ... the run closes"; every exit, "cancellation at any
    await" included, settles the run. Another process holds the SQLite
    write lock (the documented "processes on one host" setup), so
    ``Fleet._take_run_slots``'s ``lease_acquire`` waits in
    ``asyncio.to_thread``; the caller cancels the reply there. The thread
    then inserts the lease, whose id nobody kept: the principal's only slot
    (``max_in_flight=1``, ``lease_s=300``) stays taken and the user's next
    reply ends ``incomplete`` (``concurrency_limited``)."""
    path = str(tmp_path / "leases.db")
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=300)
    h = Harness(HarnessConfig(store=SQLiteStore(path), concurrency_limits=[limit]), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("one"), text("two")], model="m"), [searcher(Ran())],
                       h.middlewares(), name="a")
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")

    async def reply() -> Any:
        with h.acting_for(U1):
            return await agent.reply(UserMsg("user", "hi"))

    task = asyncio.create_task(reply())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    other_process.execute("COMMIT")
    other_process.close()
    await asyncio.sleep(0.3)  # the store's thread finishes its write
    assert h.last_report(agent).terminal_state is TerminalState.CANCELLED
    with h.acting_for(U1):
        msg = await agent.reply(UserMsg("user", "again"))
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered"), msg.get_text_content()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM harness_leases").fetchone()[0] == 0


# ====================================================== 4. personal data in reports


async def test_a_report_carries_no_raw_email_of_the_principal() -> None:
    """README: "Reports and decisions carry no raw personal data unless
    `record_raw=True`." An app binds the authenticated caller with an
    ``email`` attribute (``Principal(..., **attrs)``) that an
    ``identity_args`` argument is judged against; ``build_report`` copies
    ``principal_dict(run.principal)`` verbatim, so the report and the
    ``on_report`` payload carry ``alice@example.com``."""
    ran = Ran()
    got: list[Any] = []
    config = HarnessConfig(
        tools={"lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "email"})},
        pii={"email": "redact"}, on_report=got.append,
    )
    h = Harness(config, load_entry_points=False)
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1", "user_id": "alice@example.com"})),
                           text("Order A-1 is paid.")], model="m")
    agent = make_agent(model, [shop_tools(ran)["lookup_order"]], h.middlewares(), name="a")
    _, _, report = await drive(h, agent, Principal(user_id="u-42", email="alice@example.com"))
    assert ran.of("lookup_order")  # the identity check passed on the email
    assert "alice@example.com" not in report.model_dump_json()
    assert got and "alice@example.com" not in got[-1].model_dump_json()  # the on_report payload

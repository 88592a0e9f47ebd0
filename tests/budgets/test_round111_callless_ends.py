"""Round 111 (budget). A stop that promises *no model call* still gets the two rounds narrowed to
``GenerateStructuredOutput`` when the reply owes a structured output: the
model is called and its structured output is delivered.

README, "What the caller receives":
  "a parked reply resumed by another caller, or by none | incomplete
   (refused:permission_denied) | the fallback text, without what the run
   found; no model call"
lifecycle.end_resumed_by_another: "it ends at its next step with the fallback
  answer, without a model call and without what the run found (the resumer
  may not see it)".
README, "Running many workers": concurrency_limits hold "runs in flight per
  principal"; "with none free it ends incomplete (concurrency_limited)".
README, quota rule: "daily_quota_usd is kept per principal: a run with none
  bound makes no model call (incomplete, budget)".

Cause: agent_adapter.HarnessAgentAdapter._structured_conclusion grants the
narrowed rounds to every stop except a past deadline, dependency_down and an
enclosing cap; ModelGuard._stopped_in_round lets a narrowed round through, and
nothing in ModelGuard.call re-checks permission_denied, the run slot or the
missing principal (fleet._reservable skips a run with no principal).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import ConcurrencyLimit, CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore
from tests.scripted import (
    ALICE,
    BOB,
    Ids,
    ScriptedModel,
    SlowModel,
    calls,
    confirm,
    drain,
    make_agent,
    search,
    text,
    tool,
)

pytestmark = pytest.mark.asyncio


async def lookup(user: str) -> str:
    """Look up a user's orders.

    Args:
        user (str): Whose.
    """
    return "orders of alice: A-SECRET-1"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    return "refunded"


def _output_model() -> ScriptedModel:
    return ScriptedModel([calls(("GenerateStructuredOutput", {"ids": ["A-SECRET-1"]}))] * 2 + [text("x")])


async def test_a_parked_structured_reply_resumed_by_another_caller_makes_no_model_call() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel([calls(("lookup", {"user": "alice"})), calls(("refund", {"order_id": "o-1"})),
                           *[calls(("GenerateStructuredOutput", {"ids": ["A-SECRET-1"]}))] * 2, text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup), FunctionTool(refund)])), h.middlewares())
    with h.acting_for(ALICE):  # Alice's reply parks on AgentScope's confirmation of refund
        events = [e async for e in agent.reply_stream(UserMsg("user", "refund my order"), structured_schema=Ids)]
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    made = len(model.calls)
    with h.acting_for(BOB):  # Bob answers Alice's park
        final = (await drain(agent, confirm(ask, ask.tool_calls[0])))[-1]
    report = h.last_report(agent)
    assert report.reason == "refused:permission_denied"
    assert len(model.calls) == made, "README: resumed by another caller -> no model call"
    assert final.structured_output is None, f"Bob received an output made from Alice's run: {final.structured_output}"


async def test_a_structured_run_refused_its_concurrency_slot_makes_no_model_call() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)],
                              store=MemoryStore()), load_entry_points=False)
    first = make_agent(SlowModel([text("done")], delay=1.0), h.instrument(Toolkit(tools=[tool(search)])),
                       h.middlewares(), name="first")
    model = _output_model()
    second = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(), name="second")
    with h.acting_for(ALICE):
        running = asyncio.create_task(first.reply(UserMsg("user", "one")))
        await asyncio.sleep(0.3)  # Alice's only run slot is taken
        final = await second.reply(UserMsg("user", "two"), structured_schema=Ids)
        await running
    report = h.last_report(second)
    assert report.reason == "concurrency_limited"
    assert model.calls == [], f"{len(model.calls)} model call(s) made by a run refused its slot"
    assert final.structured_output is None


async def test_a_structured_run_with_a_daily_quota_and_no_principal_makes_no_model_call() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(daily_quota_usd=1.0, prices={"scripted": (1.0, 1.0)})),
                load_entry_points=False)
    model = _output_model()
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    final = await agent.reply(UserMsg("user", "which?"), structured_schema=Ids)  # no acting_for
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "budget")
    assert model.calls == [], f"{len(model.calls)} model call(s) made, charged to no quota"
    assert final.structured_output is None


async def test_a_structured_reply_that_asks_for_more_budget_makes_no_narrowed_round() -> None:
    """A run whose budget ran out with ``on_exhausted="ask"`` waits for its
    user's approval: no narrowed round is made (it would spend after the
    question, past what the parked budget carries); the next reply, once
    extended, continues with what the parked run spent carried over."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, on_exhausted="ask", prices={"scripted": (1.0, 1.0)})),
                load_entry_points=False)
    model = ScriptedModel([
        calls(("search", {"q": "a"}), inp=960_000, out=0),  # $0.96 of $1.00: the ladder's last rung
        calls(("GenerateStructuredOutput", {"ids": ["x"]}), inp=30_000, out=0),
        calls(("GenerateStructuredOutput", {"ids": ["y"]}), inp=1_000, out=0),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        final = await agent.reply(UserMsg("user", "which?"), structured_schema=Ids)
        parked = h.last_report(agent)
        assert parked.terminal_state.value == "waiting_input"
        assert len(model.calls) == 1 and final.structured_output is None
        assert "budget" in (final.get_text_content() or "")
        h.extend(agent, 0.05)
        final = await agent.reply(UserMsg("user", "go on"), structured_schema=Ids)
    continued = h.last_report(agent)
    carried = next(d.detail for d in continued.decisions if d.action == "continue_budget")
    assert f"${parked.spent_usd:.6f}" in carried, (parked.spent_usd, carried)
    assert final.structured_output == {"ids": ["x"]}


async def test_a_structured_run_on_an_unpriced_model_makes_no_model_call() -> None:
    """An unpriced model under a capped policy: refused at its first call, and
    no narrowed round follows (``unpriced_model`` leaves no model call)."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"other": (1.0, 1.0)})), load_entry_points=False)
    model = _output_model()
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        final = await agent.reply(UserMsg("user", "which?"), structured_schema=Ids)
    report = h.last_report(agent)
    assert report.reason == "unpriced_model"
    assert model.calls == [] and final.structured_output is None

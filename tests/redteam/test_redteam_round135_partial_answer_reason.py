"""Round 135 b (the report tells the truth): a human answers one of two calls a rule
parked; the run parks again on the other, and its report said `awaiting_confirmation`,
the question that call still waits on gone.

README "Ask a human": `ask_when` parks the call and "the run reports `waiting_input`
with that reason"; a call left unanswered keeps the run waiting. Should: the parked
report's reason is the rules' questions of the calls it still awaits.

Round 136 a: when the answer reaches another worker (a shared store, the state
restored there), the questions were not carried: the reason read
`awaiting_confirmation` there.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.state import AgentState

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

QUESTION = "refunds over $50 need a human"


@pytest.mark.parametrize("answered", ["here", "on another worker"])
async def test_a_call_left_unanswered_is_still_reported_with_its_question(tmp_path: Path, answered: str) -> None:
    made: list[str] = []

    async def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
            amount (float): USD.
        """
        made.append(order_id)
        return f"refunded {amount} on {order_id}"

    def worker() -> Harness:
        return Harness(HarnessConfig(store=SQLiteStore(str(tmp_path / "fleet.db")), tools={"refund": ToolPolicy(
            role="mutation", ask_when=lambda a: f"{QUESTION} ({a['order_id']})" if a["amount"] > 50 else None)}),
            load_entry_points=False, environ={})

    model = ScriptedModel([calls(("refund", {"order_id": "o1", "amount": 80}), ("refund", {"order_id": "o2", "amount": 90})),
                           text("done"), text("done again")])
    h = worker()
    agent = make_agent(model, [refund], h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund both")
    parked = h.last_report(agent)
    assert (parked.terminal_state, parked.reason) == (
        TerminalState.WAITING_INPUT, f"{QUESTION} (o1); {QUESTION} (o2)")  # the control: the first park
    # (AgentScope asks each call of a concurrent batch in a question of its own, in either order)
    asked = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
    o1 = next(c for e in asked for c in e.tool_calls if '"o1"' in c.input)
    if answered != "here":  # the human's answer reaches another worker, the state saved and restored there
        h = worker()
        agent = make_agent(model, [refund], h.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with h.acting_for(ALICE):
        events, _ = await run(agent, inputs=UserConfirmResultEvent(
            reply_id=asked[0].reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=o1)]))
    report = h.last_report(agent)
    assert made == ["o1"]  # the approved call ran; o2 still waits for its human
    streamed = next(e.value for e in events if getattr(e, "name", None) == "harness.report")
    assert (report.terminal_state, report.reason, streamed["reason"]) == (
        TerminalState.WAITING_INPUT, f"{QUESTION} (o2)", f"{QUESTION} (o2)")

"""Round 136a: round 135's partial-answer park reason, when the partial answer reaches
another worker (the documented fleet set-up: one shared store, the app saves the
agent's state and any worker resumes it).

README "Ask a human": ``ask_when`` parks the call and "the run reports `waiting_input`
with that reason"; CHANGELOG round 135: "the reason is the rules' questions of the calls
it still awaits (`RunState.asks`, by call id)".

Attack: worker A parks two refunds (both over $50, asked by ``ask_when``). The human
approves only o1; the answer lands on worker B (a new Harness, the state restored).
``RunState.asks`` is listed NOT_CARRIED in the park record, so B knows no question.
What happened: B's run parks again on o2 with the reason ``awaiting_confirmation``
(round 135's bug, moved one host over). Should: ``refunds over $50 need a human (o2)``,
as on worker A.
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


async def test_a_partial_answer_on_another_worker_keeps_the_question(tmp_path: Path) -> None:
    made: list[str] = []

    async def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
            amount (float): USD.
        """
        made.append(order_id)
        return f"refunded {amount} on {order_id}"

    db = str(tmp_path / "fleet.db")

    def worker() -> Harness:
        return Harness(HarnessConfig(store=SQLiteStore(db), tools={"refund": ToolPolicy(
            role="mutation", ask_when=lambda a: f"{QUESTION} ({a['order_id']})" if a["amount"] > 50 else None)}),
            load_entry_points=False, environ={})

    model = ScriptedModel([calls(("refund", {"order_id": "o1", "amount": 80}),
                                 ("refund", {"order_id": "o2", "amount": 90})),
                           text("done"), text("done again")])
    a = worker()
    agent = make_agent(model, [refund], a.middlewares())
    with a.acting_for(ALICE):
        events, _ = await run(agent, "refund both")
    parked = a.last_report(agent)
    assert (parked.terminal_state, parked.reason) == (
        TerminalState.WAITING_INPUT, f"{QUESTION} (o1); {QUESTION} (o2)")
    asked = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    o1 = next(c for c in asked.tool_calls if '"o1"' in c.input)
    saved = agent.state.model_dump_json()

    b = worker()  # the human's answer reaches another worker
    there = make_agent(model, [refund], b.middlewares(), state=AgentState.model_validate_json(saved))
    with b.acting_for(ALICE):
        await run(there, inputs=UserConfirmResultEvent(
            reply_id=asked.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=o1)]))
    report = b.last_report(there)
    assert made == ["o1"]  # the approved call ran; o2 still waits
    assert (report.terminal_state, report.reason) == (TerminalState.WAITING_INPUT, f"{QUESTION} (o2)")

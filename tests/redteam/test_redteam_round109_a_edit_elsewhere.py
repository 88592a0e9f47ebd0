"""Round 109 (a), a stated limit: an edit a human makes to a parked call is
made, and its confirmation answered, on the worker that parked it. The edit
is not written to the park record another worker reads (two Harnesses, one
SQLite file), so there the edit raises ``ValueError`` and an edited
confirmation is refused ``approval_mismatch`` (the model asks the user
again): it fails closed, and nothing runs on an approval nobody can check.
README "Ask a human": ``approve_edit``'s *Limit*."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ScriptedModel, calls, drain, make_agent, text

pytestmark = pytest.mark.asyncio

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


def worker(path: Path) -> Harness:
    return Harness(HarnessConfig(store=SQLiteStore(str(path)), tools={"refund": ToolPolicy(
        role="mutation", ask_when=lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None,
    )}), load_entry_points=False, environ={})


async def parked(tmp_path: Path) -> tuple[Harness, Any, ScriptedModel, RequireUserConfirmEvent]:
    RAN.clear()
    a = worker(tmp_path / "fleet.db")
    model = ScriptedModel([calls(("refund", {"order_id": "o-1", "amount": 80.0})), text("done")])
    agent = make_agent(model, [refund], a.middlewares())
    with a.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "refund o-1, 80"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    assert RAN == []
    return a, agent, model, ask


def on_b(tmp_path: Path, agent: Any, model: ScriptedModel) -> tuple[Harness, Any]:
    b = worker(tmp_path / "fleet.db")
    state = AgentState.model_validate_json(agent.state.model_dump_json())
    return b, make_agent(model, [refund], b.middlewares(), state=state)


def confirmed(ask: RequireUserConfirmEvent, call: Any) -> UserConfirmResultEvent:
    return UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=call)])


async def test_an_edit_on_another_worker_is_refused_there(tmp_path: Path) -> None:
    _, agent, model, ask = await parked(tmp_path)
    b, there = on_b(tmp_path, agent, model)
    with b.acting_for(ALICE), pytest.raises(ValueError, match="is not waiting for approval"):
        b.approve_edit(there, ask.tool_calls[0], {"order_id": "o-1", "amount": 60.0})
    assert RAN == []


async def test_an_edited_confirmation_answered_elsewhere_fails_closed(tmp_path: Path) -> None:
    a, agent, model, ask = await parked(tmp_path)
    with a.acting_for(ALICE):
        edited = a.approve_edit(agent, ask.tool_calls[0], {"order_id": "o-1", "amount": 60.0})
    b, there = on_b(tmp_path, agent, model)  # the state saved after the edit, as after a reply
    with b.acting_for(ALICE):
        await drain(there, confirmed(ask, edited))
    report = b.last_report(there)
    assert RAN == []  # nothing runs on an approval this worker cannot check
    assert report.refusals == {"approval_mismatch": 1}
    told = " ".join(str(m) for m in model.calls[-1].formatted)
    assert "[harness:approval_mismatch]" in told and "ask the user again" in told


async def test_an_edit_answered_on_the_parking_worker_runs(tmp_path: Path) -> None:
    a, agent, model, ask = await parked(tmp_path)
    with a.acting_for(ALICE):
        edited = a.approve_edit(agent, ask.tool_calls[0], {"order_id": "o-1", "amount": 60.0})
        await drain(agent, confirmed(ask, edited))
    assert RAN == ["refund:o-1:60.0"]


async def test_an_agent_rebuilt_on_the_parking_worker_cannot_edit_but_resumes(tmp_path: Path) -> None:
    """Round 162 b: the same limit on the worker that parked the call, once
    its agent is collected and rebuilt from the saved state (the parked run
    left the table with it): the edit raises ``ValueError``; a plain
    confirmation resumes from the park record, as on another worker."""

    a, agent, model, ask = await parked(tmp_path)
    state = agent.state.model_dump_json()
    del agent
    gc.collect()
    assert len(a.table) == 0
    rebuilt = make_agent(model, [refund], a.middlewares(), state=AgentState.model_validate_json(state))
    with a.acting_for(ALICE), pytest.raises(ValueError, match="is not waiting for approval"):
        a.approve_edit(rebuilt, ask.tool_calls[0], {"order_id": "o-1", "amount": 60.0})
    with a.acting_for(ALICE):
        await drain(rebuilt, confirmed(ask, ask.tool_calls[0]))
    assert RAN == ["refund:o-1:80.0"]
    assert a.last_report(rebuilt).terminal_state.value == "completed"

"""Round 110: a human was asked about a refund beside an answer already delivered, when
the wait that lets the finishing tool complete the run is AgentScope's own
permission engine (an async ``check_permissions`` of the tool, e.g. a look-up
in the company's entitlement service) instead of an async ``ask_when``.

``refund`` has a sync ``ask_when`` ("refunds over $50 need a human") and an
async tool permission check (0.2 s, then ALLOW). ``answer`` is the finishing
tool. The model writes both in one (concurrent) batch. The harness judges
the refund (ask), then awaits AgentScope's engine; meanwhile the finishing
tool is judged (no park recorded yet: ``_waits`` runs after the engine), runs
and completes the run. The engine then answers ALLOW and the harness parks
the refund: a ``RequireUserConfirmEvent`` for a call nobody will run.

README ("Ask a human"): "a call that would be parked, by the harness or by
AgentScope's own permission engine, while the finishing tool admitted in its
batch delivers is refused (``run_concluded``), not asked about (nobody would
ever run it)". CHANGELOG round 109: "A call about to be parked once the run
ended is refused ``run_concluded``, not asked about."

Cause: ``HarnessToolAdapter._judged`` (adapters/tool_adapter.py): on the
``verdict.ask`` path, after ``await next_handler(...)`` (the engine), nothing
checks ``flow.answer_under_way`` again (the engine-ASK path does)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, drain, make_agent, text, tool

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


async def answer(text: str) -> str:
    """Deliver the final answer to the user.

    Args:
        text (str): The answer.
    """
    RAN.append("answer")
    return text


class EntitledTool(FunctionTool):
    """A tool whose permission is read from an entitlement service (async)."""

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        await asyncio.sleep(0.2)
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="entitled")


async def test_no_human_is_asked_beside_an_answer_delivered_while_the_engine_decided() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", ask_when=lambda a: "refunds over $50 need a human"
                             if a["amount"] > 50 else None),
        "answer": ToolPolicy(role="finish"),
    }), load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("refund", {"order_id": "o-1", "amount": 80.0}), ("answer", {"text": "Your refund of $80 is done."})),
        text("The refund is done."),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[EntitledTool(refund), tool(answer)])), h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "refund order o-1, $80"))
    asked = next((i for i in items if isinstance(i, RequireUserConfirmEvent)), None)
    parked = h.last_report(agent)

    said = ""
    if asked is not None:  # the human says yes
        with h.acting_for(ALICE):
            items = await drain(agent, UserConfirmResultEvent(reply_id=asked.reply_id, confirm_results=[
                ConfirmResult(confirmed=True, tool_call=call) for call in asked.tool_calls]))
        said = " ".join(m.get_text_content() or "" for m in items if isinstance(m, Msg))
    final = h.last_report(agent)

    # a human who approved sees the approved call run (or is never asked about one that cannot)
    assert asked is None or "refund:o-1:80.0" in RAN, (
        f"asked (report {parked.terminal_state.value}: {parked.reason!r}); approved; ran {RAN}; "
        f"told {said!r}; report {final.terminal_state.value} ({final.reason})"
    )
    assert asked is None or final.terminal_state is not TerminalState.COMPLETED

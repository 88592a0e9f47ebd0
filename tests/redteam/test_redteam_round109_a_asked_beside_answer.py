"""Round 109 (a). A human is asked about a call that will never run, beside
an answer already delivered; their "yes" runs nothing, and they are told it
is done.

``refund`` has an async ``ask_when`` (README: "sync or async"; here it takes
0.2 s, e.g. a look-up of the customer's refund limit); ``answer`` is the
finishing tool. The model writes both in one (concurrent) batch: refund $80,
and "Your refund of $80 is done." The finishing tool is judged and runs
while the refund's rule is still being read, so the run completes
(``mark_terminal``); then the refund's rule asks and the call is parked: the
user gets a ``RequireUserConfirmEvent`` and the report says
``waiting_input`` ("refunds over $50 need a human"). The human approves: the
refund is refused ``run_concluded`` (the run was over), never runs, and the
reply delivers "Your refund of $80 is done." with ``completed``.

README ("Ask a human"): "The answer is not delivered beside a call waiting
for a human ... the finishing tool called in that state, or in the batch of
such a call (written before the human decided, even when it is judged
after), is refused (``not_ready``) ...; a call that would be parked, by the
harness or by AgentScope's own permission engine, while the finishing tool
admitted in its batch delivers is refused (``run_concluded``), not asked about
(nobody would ever run it)."

Cause: ``CallFlow._judge`` (calls.py) checks the run's end
(``run.facts.terminal``, ``_stopped_by_gate``) right after the gates, before
awaiting ``ask_when``; ``answer_under_way`` only looks for a finishing tool
still *in flight*, and ``_written_before_a_decision`` only for a park already
recorded. A finishing tool of the batch that completed while the rule was
awaited is seen by neither, so the call is parked in a run that has ended.

Round 110 (the second case): the same when the wait that lets the finishing tool
complete the run is AgentScope's own permission engine (an async
``check_permissions``, e.g. an entitlement service) instead of an async
``ask_when``. Cause then: ``HarnessToolAdapter._judged`` did not check
``flow.answer_under_way`` again after awaiting the engine on the ``verdict.ask`` path."""

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


async def over_50(args: dict[str, Any]) -> str | None:
    await asyncio.sleep(0.2)  # the customer's refund limit, read from a service
    return "refunds over $50 need a human" if args["amount"] > 50 else None


class EntitledTool(FunctionTool):
    """A tool whose permission is read from an entitlement service (async)."""

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        await asyncio.sleep(0.2)
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="entitled")


@pytest.mark.parametrize("wait", ["async ask_when (round 109)", "async permission engine (round 110)"])
async def test_no_human_approves_a_call_beside_an_answer_already_delivered(wait: str) -> None:
    RAN.clear()
    engine = "engine" in wait
    rule = (lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None) if engine else over_50
    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", ask_when=rule),
        "answer": ToolPolicy(role="finish"),
    }), load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("refund", {"order_id": "o-1", "amount": 80.0}), ("answer", {"text": "Your refund of $80 is done."})),
        text("The refund is done."),
    ])
    tools: Any = h.instrument(Toolkit(tools=[EntitledTool(refund), tool(answer)])) if engine else [refund, answer]
    agent = make_agent(model, tools, h.middlewares())
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

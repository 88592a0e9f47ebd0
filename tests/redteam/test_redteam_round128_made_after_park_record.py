"""Round 128 b. A call admitted after its reply's park record was written is made again
when the park is answered on another worker.

README "Security / Every call is gated" (round 127): "A call the run admitted
is made once: one still running when its reply parked (beside a question for a
human or a client-run call in one batch), which AgentScope runs again on the
resume, is refused (`duplicate_call` ...), in this process or, from the park
record, in another."

Attack: round 127's own scenario moved to a second worker (two workers on one
SQLite file). One model turn calls a client-run tool (`verify_code`) and a
concurrency-safe `charge` whose own permission check takes a moment (a payment
tool asking its provider: 0.3 s; without it the same happens in most runs,
the SQLite record write racing the plain judging). AgentScope streams the client question first; the
reader closes the stream at it (README: left parked) and the app saves the
agent's state. The park record is written at that park, before the charge's
judging ends (measured: `made` in the record is [verify_code's id]); `charge`
is admitted after it (``RunState.made`` gains its id in this process only: the
record is never written again) and its body runs here. The client's result is
sent to the other worker.

What happens: the other worker's run, restored from a record whose `made`
lacks the charge, re-presents it:
- state saved at once (the charge still being judged): its block is PENDING,
  ``view.resumed`` is False, ``RunState.made`` is never consulted, and it is
  judged as a new call and RUNS: the card is charged twice for one call.
- state saved while the charge runs (block ALLOWED): it is refused
  ``approval_mismatch`` "These arguments differ from what the user approved
  ... ask the user again": nobody was ever asked, the charge did happen, and
  the model reads it did not (the false report round 127 fixed in-process).
Should: a call admitted after the park is written into the record (or the
record re-written at admission, as ``record_parked_leads`` does for spend),
and ``made`` consulted for a non-resumed call too.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import TextBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, ToolBase, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, drain, make_agent, text, tool_messages

pytestmark = pytest.mark.asyncio

CHARGED: list[tuple[str, int]] = []
CHECK_S: list[float] = []


async def charge(order_id: str, amount: int) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
        amount (int): USD.
    """
    CHARGED.append((order_id, amount))
    await asyncio.sleep(0.5)  # a payment provider's round trip
    return f"charged ${amount} for {order_id}"


class CheckedCharge(FunctionTool):
    """The payment tool asks its provider whether the card may be charged
    (``CHECK_S``: a moment, so its admission comes after the reader left)."""

    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        await asyncio.sleep(CHECK_S[-1])
        return ALLOW


class VerifyCode(ToolBase):
    """The client checks a one-time code on the user's device (concurrency safe)."""

    name = "verify_code"
    description = "Check the one-time code on the user's device."
    input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        return ALLOW


def worker(path: str) -> Harness:
    return Harness(HarnessConfig(store=SQLiteStore(path), tools={"charge": ToolPolicy(role="mutation")}),
                   load_entry_points=False, environ={})


def toolkit(h: Harness) -> Toolkit:
    return h.instrument(Toolkit(tools=[VerifyCode(), CheckedCharge(charge, permission=ALLOW)]))


@pytest.mark.parametrize("check_s", [0.3, 0.0], ids=["admitted-after-the-reader-left", "admitted-before"])
async def test_a_charge_beside_a_client_call_is_made_once_across_two_workers(tmp_path: Path, check_s: float) -> None:
    """Round 129 b: judged across the pause (the reader left at the question
    while the charge was judged), it is not made on the first worker (its
    reply moved on without it) and the resume makes it once; admitted before,
    it is made there and the record says so: the resume refuses it as made."""
    CHARGED.clear()
    CHECK_S.append(check_s)
    path = str(tmp_path / "fleet.db")
    here = worker(path)
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("charge", {"order_id": "A-1", "amount": 80})),
                           text("Paid."), text("x")])
    agent = make_agent(model, toolkit(here), here.middlewares())
    with here.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "pay order A-1"), yield_final_msg=True)
        asked = None
        async for item in stream:
            if isinstance(item, RequireExternalExecutionEvent):
                asked = item
                break
        await stream.aclose()  # README: the reply is left parked as at its end
    assert asked is not None and [c.name for c in asked.tool_calls] == ["verify_code"]
    await asyncio.sleep(0.1)
    saved = agent.state.model_dump_json()  # the app saves the parked agent's state
    await asyncio.sleep(1.5)  # the first worker's charge, if any, has long ended
    # a slow check is surely judged across the pause; an instant one is admitted before the reader left
    # in most runs, not in all (the event loop's order): whichever happened, the card is charged once
    made_here = bool(CHARGED)
    assert CHARGED == ([("A-1", 80)] if made_here else []) and not (check_s and made_here), CHARGED

    there = worker(path)
    moved = make_agent(model, toolkit(there), there.middlewares(), state=AgentState.model_validate_json(saved))
    call = asked.tool_calls[0]
    result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                             state=ToolResultState.SUCCESS)
    with there.acting_for(ALICE):
        await drain(moved, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    await asyncio.sleep(1.5)
    told = [m for m in tool_messages(model.calls[-1]) if "code ok" not in m]
    # made once, wherever: here (the resume refuses it as made), or by the resume; or, refused here as
    # judged across the pause before the state was saved (its refusal in the state), not made at all and
    # the model told so ("call it again"): never twice, never told otherwise than what happened
    refused_here = not CHARGED and not check_s
    assert CHARGED == ([] if refused_here else [("A-1", 80)]), (
        f"one charge call by the model, the card charged {len(CHARGED)} times across two workers: {CHARGED}")
    said = "duplicate_call" if made_here else "was not made" if refused_here else "charged $80"
    assert told and said in told[-1] and "approval_mismatch" not in told[-1], f"the model reads: {told}"

"""Round 129 b. A call still being judged when its reply parks is made twice when the
park is answered quickly on another worker.

README "Security / Every call is gated": "A call the run admitted is made once:
one still running when its reply parked (beside a question for a human or a
client-run call in one batch), which AgentScope runs again on the resume, is
refused (`duplicate_call` ...), in this process or, from the park record, in
another." Round 128 made it hold in one process for a call still being judged
(`view.id in run.judging`), and across workers once the admission rewrote the
record.

Attack: two workers on one SQLite file. One turn calls a client-run tool and a
`charge` whose own permission check takes 0.6 s. The reader closes the stream
at the client's question (left parked), the app saves the state and the
client's result reaches the other worker at once (the code check is instant),
while the first worker is still judging the charge.

What happens: the second worker reads a record whose `made` lacks the charge
(it was not admitted yet) and nothing tells it the charge is being judged
elsewhere: it judges it as new and runs it; the first worker's judging ends,
admits it (the park already claimed by the other worker) and runs it too.
The card is charged twice for one call.
Should: a call admitted after its run parked is admitted only while the park
is unclaimed (claim-or-check in the store at admission, as `record_parked`
already writes there), or the resume treats the park's unfinished, unmade
calls of that batch as possibly made.
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


async def charge(order_id: str, amount: int) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
        amount (int): USD.
    """
    CHARGED.append((order_id, amount))
    await asyncio.sleep(0.2)
    return f"charged ${amount} for {order_id}"


class CheckedCharge(FunctionTool):
    async def check_permissions(self, tool_input, context):  # type: ignore[override]
        await asyncio.sleep(0.6)  # the payment provider is asked whether the card may be charged
        return ALLOW


class VerifyCode(ToolBase):
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


async def test_a_charge_judged_at_the_park_is_made_on_both_workers(tmp_path: Path) -> None:
    CHARGED.clear()
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
        await stream.aclose()
    assert asked is not None
    saved = agent.state.model_dump_json()  # saved at once: the charge is still being judged
    assert CHARGED == []

    there = worker(path)
    moved = make_agent(model, toolkit(there), there.middlewares(), state=AgentState.model_validate_json(saved))
    call = asked.tool_calls[0]
    result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                             state=ToolResultState.SUCCESS)
    with there.acting_for(ALICE):
        await drain(moved, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    await asyncio.sleep(2.5)  # 3x the check and the charge: the first worker's judging has long ended
    told = [m for m in tool_messages(model.calls[-1]) if "code ok" not in m]
    assert CHARGED == [("A-1", 80)], (
        f"one charge call by the model, the card charged {len(CHARGED)} times across two workers: {CHARGED}; "
        f"the model read {told}")

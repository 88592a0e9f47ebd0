"""Round 133b: round 130's fix (the park id, now with "recorded", kept in the agent's
state) is written only when the park is recorded, and a reply left at the client's
question while its batch still runs records its park at the stream's close: a state the
app saves as it forwards the question (the event it received) carries no park id.

Promise (README "Running many workers"): "A call the run admitted is made once: one still
running when its reply parked ... is refused ... in this process or, from the park record,
in another"; "a park whose record the agent's state says was never written ... acts for
nobody" in another process.
Attack: round 130's scenario (worker A's record write times out, SQLite locked 0.6 s), but
the app saves the state when the RequireExternalExecutionEvent arrives, before closing the
stream.
What happens: the saved state has no park key; B reads no record, nothing to claim, resumes
unverified and makes the running charge again: the card is charged twice.
Fix (lifecycle ``_keep_parked``/close path): keep the park id (recorded: False) in the
state before the event reaches the consumer (park and keep the id at the question), or
record the park before yielding the question when a batch still runs; or say in README
that the state must be saved only after the stream closes.
"""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import TextBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.state import AgentState
from agentscope.tool import ToolBase, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, drain, make_agent, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

CHARGED: list[str] = []


async def charge(order_id: str) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
    """
    CHARGED.append(order_id)
    await asyncio.sleep(0.5)  # the payment provider's round trip
    return f"charged {order_id}"


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
    return Harness(HarnessConfig(store=SQLiteStore(path, timeout_s=0.3), tools={"charge": ToolPolicy(role="mutation")}),
                   load_entry_points=False, environ={})


def toolkit(h: Harness) -> Toolkit:
    return h.instrument(Toolkit(tools=[VerifyCode(), tool(charge)]))


@pytest.mark.parametrize("busy", [
    pytest.param(False, id="control-store-answers"),
    pytest.param(True, id="store-busy-at-the-park", marks=pytest.mark.xfail(
        strict=True, reason="README limit: a state saved at the question itself names no park")),
])
async def test_state_saved_at_the_question_running_charge_made_again_elsewhere(tmp_path: Path,
                                                                                       busy: bool) -> None:
    CHARGED.clear()
    path = str(tmp_path / "fleet.db")
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("charge", {"order_id": "A-1"})),
                           text("Paid."), text("x")])
    a = worker(path)
    first = make_agent(model, toolkit(a), a.middlewares())
    with a.acting_for(ALICE):
        stream = first.reply_stream(UserMsg("user", "pay order A-1"), yield_final_msg=True)
        asked = None
        async for item in stream:
            if isinstance(item, RequireExternalExecutionEvent):
                asked = item
                break
        assert asked is not None
        for _ in range(100):  # the charge runs beside the question (its body takes 0.5 s)
            if CHARGED:
                break
            await asyncio.sleep(0.005)
        assert CHARGED == ["A-1"]
        saved = first.state.model_dump_json()  # the app saves the state as it forwards the question
        lock = sqlite3.connect(path, isolation_level=None)
        if busy:
            lock.execute("BEGIN EXCLUSIVE")  # another process writes to the file for a moment
        await stream.aclose()  # README: left parked as at its end
        await asyncio.sleep(0.6)  # 2x A's store timeout: A's park is over (its record written, or timed out)
        if busy:
            lock.execute("COMMIT")
        lock.close()

    b = worker(path)
    second = make_agent(model, toolkit(b), b.middlewares(), state=AgentState.model_validate_json(saved))
    call = asked.tool_calls[0]
    result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                             state=ToolResultState.SUCCESS)
    with b.acting_for(ALICE):
        await drain(second, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    await asyncio.sleep(1.5)  # 3x the charge: every run of it has ended
    told = [m for m in tool_messages(model.calls[-1]) if "code ok" not in m]
    report = b.last_report(second)
    assert CHARGED == ["A-1"], (
        f"one charge call by the model, the card charged {len(CHARGED)} times across two workers; "
        f"the model read {told}; worker B's run: {report.terminal_state.value} ({report.reason}), "
        f"park id in the state: {'agentscope_harness.park' in saved}; "
        f"B decided {[(d.hook, d.action) for d in report.decisions if d.hook.startswith('resume')]}")

"""Round 130 a. A call running when its reply parks is made again on another worker
when the park's record could not be written (the store busy for a moment at the
park): the card is charged twice.

README "Security / Every call is gated": "A call the run admitted is made once: one
still running when its reply parked (beside a question for a human or a client-run
call in one batch), which AgentScope runs again on the resume, is refused
(`duplicate_call` ...), in this process or, from the park record, in another."
"Running many workers": "a park whose record can no longer be read (expired ...,
lost, or the store not answering) acts for nobody, here too: its one answer cannot be
told from one used elsewhere (a record never written, the store down when the reply
parked, leaves the park this process's: answered here once, claimed ...)".

Attack: two workers on one SQLite file. Worker A: one turn calls the client-run
`verify_code` and `charge` (its provider takes 0.5 s). The reader closes the stream at
the client's question (README: left parked as at its end) while the charge runs; at
that moment another process holds the SQLite file's write lock for 0.6 s (a
backup, a migration), so A's park record write times out (A's `timeout_s` 0.3 s:
logged, `park_recorded` False). The park id is still kept in the agent's state
(`middle_context["agentscope_harness.park"]`). The app saves the state; the
client's result reaches worker B (the store answers again).

What happens: B reads no record, claims the park under the id the state carries
(A never answered it, so the claim is B's) and acts as an unverified resume with an
empty `made`: the charge's block is ALLOWED without a result, AgentScope runs it
again, and B admits and makes it. The card is charged twice for one call.
Control (no lock): B reads A's record, refuses the charge as made before.
Should: a state that carries a park id with no record for it in a store that keeps
records is a record lost: the resume acts for nobody (README's own rule), or the
calls the state shows ALLOWED without a result are treated as possibly made.
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


@pytest.mark.parametrize("busy", [False, True], ids=["control-store-answers", "store-busy-at-the-park"])
async def test_a_running_charge_is_made_again_elsewhere_when_the_park_went_unrecorded(tmp_path: Path,
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
        lock = sqlite3.connect(path, isolation_level=None)
        if busy:
            lock.execute("BEGIN EXCLUSIVE")  # another process writes to the file for a moment
        await stream.aclose()  # README: left parked as at its end
        await asyncio.sleep(0.6)  # 2x A's store timeout: A's park is over (its record written, or timed out)
        if busy:
            lock.execute("COMMIT")
        lock.close()
    saved = first.state.model_dump_json()  # the park id A kept is in it

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

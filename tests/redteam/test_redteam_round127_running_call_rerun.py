"""Round 127 b (never take an action its caller is not allowed to take): a call
still running when its reply parks is run again, or refused with a false
sentinel, when the park is answered.

README "Security / Every call is gated": "A call under an id another call of the
run holds (being judged, admitted, running or parked: ...) is refused
(`duplicate_call`, decision `call_id_check`) before any gate sees it: the harness
keeps a call's judgement, slots and outcome by its id, and a second call there would
take the first one's place." README "Ask a human": "A reader that stops at the
question (`RequireUserConfirmEvent` or `RequireExternalExecutionEvent`, the last item
AgentScope streams before it waits) and closes or drops the stream leaves the reply
parked as at its end".

Attack: one model turn calls a client-run tool (or a tool that needs a human) and a
slow, concurrency-safe mutation (`charge`). AgentScope streams the question while
`charge` still runs in its concurrent task; the reader closes the stream at the
question (as the README allows) and answers it. `charge`'s block is still ALLOWED
with no result, so AgentScope executes it again on the resume; the tool adapter takes
any ALLOWED call for a human-confirmed resume (`resumed = call.state == ALLOWED`),
which skips the held-id check.

What happened: (1) after a client result, the second `charge` is judged as a
"resume_unverified" (the park "was not seen by this process": it was) and runs: the
card is charged twice for one call the model made once; (2) after a human's yes
to the other call, the second `charge` is refused `approval_mismatch` ("These
arguments differ from what the user approved ... ask the user again") although
nobody was ever asked about it and it did run: the model reads that the charge did
not happen (its real result never reaches it), and is told to ask the user again.

Should: a call the run holds (admitted, still running) met again under its id is
not made again, and the model is never told a call that ran was refused.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent, RequireUserConfirmEvent
from agentscope.message import TextBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, confirm, drain, make_agent, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

CHARGED: list[tuple[str, int]] = []


async def charge(order_id: str, amount: int) -> str:
    """Charge the customer's card for an order.

    Args:
        order_id (str): The order.
        amount (int): USD.
    """
    CHARGED.append((order_id, amount))
    await asyncio.sleep(0.5)  # a payment provider's round trip
    return f"charged ${amount} for {order_id}"


async def note(text_: str) -> str:
    """Write a note on the order.

    Args:
        text_ (str): The note.
    """
    return "noted"


class VerifyCode(ToolBase):
    """The client checks a one-time code on the user's device (concurrency safe)."""

    name = "verify_code"
    description = "Check the one-time code on the user's device."
    input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, tool_input: dict, context: object) -> PermissionDecision:
        return ALLOW


async def _until_question(agent, inputs, kind):
    """Read the reply to its question, then close the stream (README: left parked)."""
    stream = agent.reply_stream(inputs, yield_final_msg=True)
    asked = None
    async for item in stream:
        if isinstance(item, kind):
            asked = item
            break
    await stream.aclose()
    return asked


async def _settled() -> None:
    await asyncio.sleep(1.5)  # 3x the charge's own time: any background run of it has ended


async def test_a_charge_running_beside_a_client_call_is_made_again_on_the_clients_result() -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(tools={"charge": ToolPolicy(role="mutation")}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("charge", {"order_id": "A-1", "amount": 80})),
                           text("Paid."), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[VerifyCode(), tool(charge)])), h.middlewares())
    with h.acting_for(ALICE):
        asked = await _until_question(agent, UserMsg("user", "pay order A-1"), RequireExternalExecutionEvent)
        call = asked.tool_calls[0]
        result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text="code ok")],
                                 state=ToolResultState.SUCCESS)
        await drain(agent, ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result]))
    await _settled()
    assert CHARGED == [("A-1", 80)], f"one charge call by the model, the card charged {len(CHARGED)} times: {CHARGED}"


async def test_a_charge_running_beside_an_asked_call_is_told_refused_though_it_ran() -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(tools={"charge": ToolPolicy(role="mutation"),
                                     "note": ToolPolicy(ask_when=lambda a: "notes need a human")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("note", {"text_": "vip"}), ("charge", {"order_id": "A-1", "amount": 80})),
                           text("Paid."), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(note), tool(charge)])), h.middlewares())
    with h.acting_for(ALICE):
        asked = await _until_question(agent, UserMsg("user", "pay order A-1"), RequireUserConfirmEvent)
        assert [c.name for c in asked.tool_calls] == ["note"]  # nobody is asked about the charge
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    await _settled()
    assert CHARGED == [("A-1", 80)]  # it ran (once)
    read = tool_messages(model.calls[-1])
    told = [m for m in read if "charge" in m or "approval_mismatch" in m]
    assert not any("approval_mismatch" in m for m in read), (
        f"the charge ran, yet the model reads it was refused for an approval it never needed: {told}")

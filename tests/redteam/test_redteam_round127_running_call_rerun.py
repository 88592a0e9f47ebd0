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
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg

from agentscope_harness import ToolPolicy
from tests.redteam.park_kit import PAY, charge_tool, instrumented, pay_model, worker
from tests.scripted import (
    ALICE,
    ScriptedModel,
    calls,
    client_result,
    confirm,
    drain,
    make_agent,
    text,
    tool,
    tool_messages,
    until_question,
)

pytestmark = pytest.mark.asyncio


async def note(text_: str) -> str:
    """Write a note on the order.

    Args:
        text_ (str): The note.
    """
    return "noted"


async def _settled() -> None:
    await asyncio.sleep(1.5)  # 3x the charge's own time: any background run of it has ended


async def test_a_charge_running_beside_a_client_call_is_made_again_on_the_clients_result() -> None:
    card: list[tuple[str, int]] = []
    h = worker()
    model = pay_model()
    agent = make_agent(model, instrumented(h, charge_tool(card)), h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"))
        await drain(agent, client_result(asked))
    await _settled()
    assert card == [("A-1", 80)], f"one charge call by the model, the card charged {len(card)} times: {card}"


async def test_a_charge_running_beside_an_asked_call_is_told_refused_though_it_ran() -> None:
    card: list[tuple[str, int]] = []
    h = worker(tools={"charge": ToolPolicy(role="mutation"),
                      "note": ToolPolicy(ask_when=lambda a: "notes need a human")})
    model = ScriptedModel([calls(("note", {"text_": "vip"}), PAY), text("Paid."), text("x")])
    agent = make_agent(model, instrumented(h, tool(note), charge_tool(card)), h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"), RequireUserConfirmEvent)
        assert [c.name for c in asked.tool_calls] == ["note"]  # nobody is asked about the charge
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    await _settled()
    assert card == [("A-1", 80)]  # it ran (once)
    read = tool_messages(model.calls[-1])
    told = [m for m in read if "charge" in m or "approval_mismatch" in m]
    assert not any("approval_mismatch" in m for m in read), (
        f"the charge ran, yet the model reads it was refused for an approval it never needed: {told}")

"""Round 109 (a). A human's "yes, extend it" answered where the park cannot
be verified tells the model the quota is used up and to answer with what it
has, instead of asking the human again.

``Ledger(cap=1, on_exhausted="ask", extend_by=2)``, ``search`` spends 2
units: Alice's reply parks on "the web quota (0/1) is used up; approve to
extend it by 2". Her "yes" reaches a worker where the park has no record
(each worker keeps its own default store: "a store that keeps none"). The
README says such a resume is judged unverified and "a call that needs
approval (``ask_when``, ``ctx.ask``) is refused on it (``approval_mismatch``:
ask again)". The ledger's question is a ``ctx.ask`` (``spend_gate``), but the
resumed call is refused ``quota_exhausted``: the model reads "The web quota
for this task is used up (0/1). Answer with what you have.", so it gives up
on a task the human just approved more budget for, and is never told to ask
again.

Cause: ``CallFlow._judge`` (calls.py) checks "a call that needs approval,
resumed unverified" only after the ``pre_tool_call`` gates ran;
``spend_gate`` (hooks/budget.py ``_extend_or_ask``) finds no offer for the
resumed call (offers are in the record that is missing) and refuses it as an
exhausted quota first.

README ("Security", Human in the loop): "Without a record (a store that keeps
none, a record expired or lost) it cannot be compared: it is judged by every
gate and recorded as ``resume_unverified``, and a call that needs approval
(``ask_when``, ``ctx.ask``) is refused on it (``approval_mismatch``: ask
again)."""

from __future__ import annotations

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState

from agentscope_harness import Harness, HarnessConfig, Ledger, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, drain, make_agent, text, tool_messages

pytestmark = pytest.mark.asyncio

ALICE = Principal(user_id="alice", tenant="acme")
RAN: list[str] = []


async def search(q: str) -> str:
    """Search the web.

    Args:
        q (str): The query.
    """
    RAN.append(q)
    return f"found {q}"


def worker() -> Harness:
    return Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["web"], units=2)},
        ledgers={"web": Ledger(cap=1, on_exhausted="ask", extend_by=2)},
    ), load_entry_points=False, environ={})


async def test_an_approved_extension_resumed_unverified_tells_the_model_to_ask_again() -> None:
    RAN.clear()
    here = worker()
    model = ScriptedModel([calls(("search", {"q": "flights to Oslo"})), text("done")])
    agent = make_agent(model, [search], here.middlewares())
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "find me flights to Oslo"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    assert "approve to extend it by 2" in here.last_report(agent).reason

    there = worker()  # another worker: no record of the park
    restored = make_agent(model, [search], there.middlewares(),
                          state=AgentState.model_validate_json(agent.state.model_dump_json()))
    yes = UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=call) for call in ask.tool_calls])
    with there.acting_for(ALICE):
        await drain(restored, yes)

    told = tool_messages(model.calls[-1])[-1]
    report = there.last_report(restored)
    assert RAN == []  # unverified: not run (as the README says)
    assert "Answer with what you have" not in told, told  # the human said yes: not "give up"
    assert "[harness:approval_mismatch]" in told, (told, [(d.action, d.code) for d in report.decisions])

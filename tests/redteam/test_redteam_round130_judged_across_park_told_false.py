"""Round 130 a. A call refused as "judged across a park" is told a false reason, and
the decision says its resume judges it when nothing ever does.

README "Security / Every call is gated": "A call under an id another call of the
run holds (being judged, admitted, running or parked ...) is refused
(`duplicate_call`...)"; "Tells the truth": a refusal says why. Round 129
(`flow.judged_across_park`): "not made (the reply moved on without it; its resume
judges the call afresh, here or on another worker)", decision detail "judged across
a park: not made (its resume judges it)".

Attack: one model turn calls the client-run `verify_code` and a `charge` whose own
permission check takes 0.3 s (its payment provider). The reader closes the stream
at the client's question (README: left parked as at its end); the client takes
a second to answer (a human typing a code), so the charge's judging ends first.

What happens: the orphaned batch refuses the charge with ID_TAKEN ("another call
of this run has the same id (...)") and AgentScope files that DENIED result in the
context: the resume never judges it (its call has a result). The model reads that
a second call holds the charge's id: there is none (one charge, one id); a model
told another call under its id is in progress may well not charge at all. The
report's decision says "its resume judges it": it never does.
In shadow mode ("decide and record, refuse nothing") the same: the charge a bare
agent makes in its batch (its result then read on the resume) is refused, with the
same false reason.
Should: the text says what happened ("not made: its reply paused while it was
judged; call it again if you still need it"), or the call is left to its resume
(e.g. the harness's own decision held back until the resume re-presents it).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg

from agentscope_harness import ToolPolicy
from tests.redteam.park_kit import charge_tool, instrumented, pay_model, worker
from tests.scripted import ALICE, client_result, drain, make_agent, text, tool_messages, until_question

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_charge_judged_across_the_park_is_told_another_call_has_its_id(mode: str) -> None:
    card: list[tuple[str, int]] = []
    h = worker(mode=mode, tools={"charge": ToolPolicy(role="mutation")})
    model = pay_model(text("Code ok."), text("x"))
    # the payment provider is asked for 0.3 s whether the card may be charged
    agent = make_agent(model, instrumented(h, charge_tool(card, run_s=0.0, check_s=0.3)), h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"))
        await asyncio.sleep(1.0)  # the user types the code (3x the check)
        await drain(agent, client_result(asked))
    told = [m for m in tool_messages(model.calls[1]) if "charge" in m]
    report = h.last_report(agent)
    said = [d.detail for d in report.decisions if d.code == "duplicate_call"]
    # not made (its reply moved on without it); in shadow mode, which refuses nothing, made as without the harness
    assert card == ([] if mode == "enforce" else [("A-1", 80)])
    ids = [b.id for m in agent.state.context for b in m.get_content_blocks("tool_call") if b.name == "charge"]
    assert not any("another call of this run has the same id" in m for m in told) and not any(
        "its resume judges it" in d for d in said), (
        f"one charge call under one id ({ids}); the model read {told}; the report says {said}")

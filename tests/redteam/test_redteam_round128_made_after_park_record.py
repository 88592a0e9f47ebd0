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
from agentscope.message import UserMsg

from tests.redteam.park_kit import charge_tool, instrumented, pay_model, resumed, told, worker
from tests.scripted import ALICE, client_result, drain, make_agent, until_question

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("check_s", [0.3, 0.0], ids=["admitted-after-the-reader-left", "admitted-before"])
async def test_a_charge_beside_a_client_call_is_made_once_across_two_workers(tmp_path: Path, check_s: float) -> None:
    """Round 129 b: judged across the pause (the reader left at the question
    while the charge was judged), it is not made on the first worker (its
    reply moved on without it) and the resume makes it once; admitted before,
    it is made there and the record says so: the resume refuses it as made."""
    card: list[tuple[str, int]] = []
    path = str(tmp_path / "fleet.db")
    here = worker(path)
    model = pay_model()
    agent = make_agent(model, instrumented(here, charge_tool(card, check_s=check_s)), here.middlewares())
    with here.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"))
    assert [c.name for c in asked.tool_calls] == ["verify_code"]
    await asyncio.sleep(0.1)
    saved = agent.state.model_dump_json()  # the app saves the parked agent's state
    await asyncio.sleep(1.5)  # the first worker's charge, if any, has long ended
    # a slow check is surely judged across the pause; an instant one is admitted before the reader left
    # in most runs, not in all (the event loop's order): whichever happened, the card is charged once
    made_here = bool(card)
    assert card == ([("A-1", 80)] if made_here else []) and not (check_s and made_here), card
    there = worker(path)
    moved = resumed(model, there, instrumented(there, charge_tool(card, check_s=check_s)), saved)
    with there.acting_for(ALICE):
        await drain(moved, client_result(asked))
    await asyncio.sleep(1.5)
    read = told(model)
    # made once, wherever: here (the resume refuses it as made), or by the resume; or, refused here as
    # judged across the pause before the state was saved (its refusal in the state), not made at all and
    # the model told so ("call it again"): never twice, never told otherwise than what happened
    refused_here = not card and not check_s
    assert card == ([] if refused_here else [("A-1", 80)]), (
        f"one charge call by the model, the card charged {len(card)} times across two workers: {card}")
    said = "duplicate_call" if made_here else "was not made" if refused_here else "charged $80"
    assert read and said in read[-1] and "approval_mismatch" not in read[-1], f"the model reads: {read}"

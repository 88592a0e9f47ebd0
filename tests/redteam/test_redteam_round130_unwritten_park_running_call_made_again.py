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
from agentscope.message import UserMsg

from tests.redteam.park_kit import charge_tool, charged_once, instrumented, pay_model, resumed, told, worker
from tests.scripted import ALICE, client_result, drain, make_agent, until_question

pytestmark = pytest.mark.asyncio


LIMIT = pytest.mark.xfail(strict=True, reason="README limit: a state saved at the question itself names no park")


@pytest.mark.parametrize(("saved_at", "busy"), [
    pytest.param("close", False, id="control-store-answers"),
    pytest.param("close", True, id="store-busy-at-the-park"),
    pytest.param("question", False, id="saved-at-the-question-control"),
    pytest.param("question", True, id="saved-at-the-question-store-busy", marks=LIMIT),
])
async def test_a_running_charge_is_made_again_elsewhere_when_the_park_went_unrecorded(
    tmp_path: Path, saved_at: str, busy: bool,
) -> None:
    """Round 133 b, the state saved at the question: Round 133b: round 130's fix (the park id, now with "recorded", kept in the agent's
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
    card: list[tuple[str, int]] = []
    path = str(tmp_path / "fleet.db")
    model = pay_model()
    a = worker(path, timeout_s=0.3)
    first = make_agent(model, instrumented(a, charge_tool(card)), a.middlewares())
    with a.acting_for(ALICE):
        stream, asked = await until_question(first, UserMsg("user", "pay order A-1"), close=False)
        await charged_once(card)  # the charge runs beside the question (its body takes 0.5 s)
        assert card == [("A-1", 80)]
        # the app saves the state as it forwards the question, or once the reply is left parked
        saved = first.state.model_dump_json() if saved_at == "question" else None
        lock = sqlite3.connect(path, isolation_level=None)
        if busy:
            lock.execute("BEGIN EXCLUSIVE")  # another process writes to the file for a moment
        await stream.aclose()  # README: left parked as at its end
        await asyncio.sleep(0.6)  # 2x A's store timeout: A's park is over (its record written, or timed out)
        if busy:
            lock.execute("COMMIT")
        lock.close()
    saved = saved or first.state.model_dump_json()  # the park id A kept is in it

    b = worker(path, timeout_s=0.3)
    second = resumed(model, b, instrumented(b, charge_tool(card)), saved)
    with b.acting_for(ALICE):
        await drain(second, client_result(asked))
    await asyncio.sleep(1.5)  # 3x the charge: every run of it has ended
    report = b.last_report(second)
    assert card == [("A-1", 80)], (
        f"one charge call by the model, the card charged {len(card)} times across two workers; "
        f"the model read {told(model)}; worker B's run: {report.terminal_state.value} ({report.reason}), "
        f"park id in the state: {'agentscope_harness.park' in saved}; "
        f"B decided {[(d.hook, d.action) for d in report.decisions if d.hook.startswith('resume')]}")

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
from agentscope.message import UserMsg

from tests.redteam.park_kit import charge_tool, instrumented, pay_model, resumed, told, worker
from tests.scripted import ALICE, client_result, drain, make_agent, until_question

pytestmark = pytest.mark.asyncio


async def test_a_charge_judged_at_the_park_is_made_on_both_workers(tmp_path: Path) -> None:
    card: list[tuple[str, int]] = []
    path = str(tmp_path / "fleet.db")
    here = worker(path)
    model = pay_model()
    # the payment provider is asked for 0.6 s whether the card may be charged
    agent = make_agent(model, instrumented(here, charge_tool(card, run_s=0.2, check_s=0.6)), here.middlewares())
    with here.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"))
    saved = agent.state.model_dump_json()  # saved at once: the charge is still being judged
    assert card == []
    there = worker(path)
    moved = resumed(model, there, instrumented(there, charge_tool(card, run_s=0.2, check_s=0.6)), saved)
    with there.acting_for(ALICE):
        await drain(moved, client_result(asked))
    await asyncio.sleep(2.5)  # 3x the check and the charge: the first worker's judging has long ended
    assert card == [("A-1", 80)], (
        f"one charge call by the model, the card charged {len(card)} times across two workers: {card}; "
        f"the model read {told(model)}")

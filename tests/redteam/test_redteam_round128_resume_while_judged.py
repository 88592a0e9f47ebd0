"""Round 128 b. A call still being judged when its reply parks is told "not made, call it
again" on a quick resume, and then made anyway: the model calls it again and
the card is charged twice.

README "Security / Every call is gated" (round 127): "A call the run admitted
is made once: one still running when its reply parked (beside a question for a
human or a client-run call in one batch), which AgentScope runs again on the
resume, is refused (`duplicate_call`: made before the reply paused, its result
never reached the conversation; check its effect)". "Tells the truth".

Attack: one model turn calls a client-run tool (`verify_code`) and a
concurrency-safe `charge` whose own permission check takes a moment (a payment
tool asking its provider whether the card may be charged: `check_permissions`
awaits 0.3 s). AgentScope streams the client question first; the reader closes
the stream at it (README: left parked) and the client answers at once (its
code check is instant), while `charge` is still being judged.

What happens: the charge block is still PENDING (no decision yet), so the
resume presents it as a new call; its id is held (being judged) and it is
refused `duplicate_call` with ID_TAKEN: "The call to charge was not made ...
Call it again if you still need it." Then the first judging ends, the call is
admitted and its body runs (in AgentScope's orphaned batch task). The model,
told it was not made, calls it again: the card is charged twice.
Should: a call whose id is being judged or was admitted (``judging`` /
``made``) met again on a resume is not described as not made; it waits for, or
reports, the first one's outcome (or the orphaned first judging is refused
once the reply parked).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg

from tests.redteam.park_kit import PAY, charge_tool, instrumented, pay_model, told, worker
from tests.scripted import ALICE, calls, client_result, drain, make_agent, text, until_question

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("delay", [0.0, 0.3], ids=["control-instant-check", "slow-check"])
async def test_a_charge_judged_across_a_quick_resume_is_told_not_made_then_made(delay: float) -> None:
    card: list[tuple[str, int]] = []
    h = worker()
    model = pay_model(calls(PAY),  # told: "Call it again"
                      text("Paid."), text("x"))
    agent = make_agent(model, instrumented(h, charge_tool(card, run_s=0.2, check_s=delay)), h.middlewares())
    with h.acting_for(ALICE):
        asked = await until_question(agent, UserMsg("user", "pay order A-1"))
        await drain(agent, client_result(asked))
    await asyncio.sleep(1.0)  # 3x the check and the charge: any background run of it has ended
    read = told(model, 1)
    # whatever the model was told is true, and the card is charged once: admitted before the
    # reader left, the charge was made (the resume refuses it as made); judged across that, it
    # was not (Round 129 b: not admitted after the pause), and the model's call again makes it
    assert len(card) == 1, f"the model read {read}; the card was charged {len(card)} times: {card}"

"""Round 129 a (tell the user the truth / made once): a cancel whose result was
withheld (`pii` `block`) RAN; round 128 now knows it (`facts.done_otherwise`,
"What I did: done (its result was withheld)"), yet the identical call sent
again is admitted and runs a second time: the repeat gate reads the withheld
call as a failure (`record_outcome(ok=False)`).

README hook 11 (repeat_call_gate): an identical call "that already succeeded"
is refused `duplicate_call`; hook 24: "a call that ran but whose result the
harness withheld from the model, `pii` `block` or an injection, succeeded".
The sentinel the harness writes says "Do not retry": the model that retries
anyway (it cannot see whether the cancel happened) cancels, charges or refunds
twice.

Attack: `charge_card` (mutation, `pii={"email": "block"}`: its receipt names
the customer's address) runs; the model, told it was withheld, calls it again
with the same arguments.

What happened: both calls ran (`CHARGED == ["A-1", "A-1"]`); the run's own
facts say the first one was done (`facts.done_otherwise["charge_card"]`).

Should: `repeat_call_gate` treats a call in `done_otherwise` (this run's own,
withheld) as already succeeded: `duplicate_call` ("it was made; its result was
withheld"), as it does for a success whose result is in the context.

Round 130 c (made once; the retries case): a charge whose result was withheld (`pii` `block`)
ran; the identical call is refused `duplicate_call` ("Do not retry it"), but
that refusal is an *efficiency* refusal (`repeat_call_gate`, not `hard`): after
`escape_after_rejects` (2) refusals of the gate in a run it latches open, and
the third retry of the withheld charge RUNS: the card is charged twice.

README hook 11 (repeat_call_gate, E/S): "Identical call ... that already ran
though its result was withheld (`pii_blocked`, `injection_blocked`):
`duplicate_call`; one that already succeeded, its result still in the context
..., or has a twin admitted in its batch: `duplicate_call` with a ref (E)" -- the
escape (E) is for the presumption (a success whose result the model can
reuse); a withheld call is an exact fact (it ran), like `repeated_failure`
("never escapes"). CHANGELOG round 129: "Such a call made again with the same
arguments is refused (`duplicate_call`: it ran ...; a card was charged twice)".

Attack: `charge_card` (mutation, `pii={"email": "block"}`); the model, told
only that the result was withheld, keeps retrying the same call (three rounds).

What happened: rounds 2 and 3 are refused, round 4 is let through by the latch
(`allow_escape`): CHARGED == ["A-1", "A-1"].
Should: the withheld-call refusal is `hard=True` (never latches).
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

CHARGED: list[str] = []


async def charge_card(order_id: str) -> str:
    """Charge the card for an order.

    Args:
        order_id (str): The order.
    """
    CHARGED.append(order_id)
    return f"order {order_id} charged $80; receipt sent to jane.doe@example.com"


@pytest.mark.parametrize("tries", [2, 4], ids=["retried_once", "retried_past_the_latch"])
async def test_a_withheld_mutation_is_not_made_again(tries: int) -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(tools={"charge_card": ToolPolicy(role="mutation", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("charge_card", {"order_id": "A-1"}))] * tries
                          + [text("I could not confirm the charge.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(charge_card)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "charge A-1")
    report = h.last_report(agent)
    assert "withheld" in model.calls[1].last_result  # the model was told the first result was withheld
    # the card was charged once: the identical calls are refused as already made, the latch never opens
    assert CHARGED == ["A-1"], (
        f"the withheld charge ran {len(CHARGED)} times; refusals {dict(report.refusals)}; "
        f"decisions {[(d.hook, d.action) for d in report.decisions if d.hook == 'repeat_call_gate']}")
    assert report.refusals.get("duplicate_call", 0) >= 1

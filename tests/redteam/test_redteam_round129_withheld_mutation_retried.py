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


async def test_a_withheld_mutation_is_not_made_again() -> None:
    CHARGED.clear()
    h = Harness(HarnessConfig(tools={"charge_card": ToolPolicy(role="mutation", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("charge_card", {"order_id": "A-1"})),
                           calls(("charge_card", {"order_id": "A-1"})),
                           text("I could not confirm the charge.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(charge_card)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "charge A-1")
    assert h.last_report(agent).refusals.get("duplicate_call") == 1
    assert "withheld" in model.calls[1].last_result  # the model was told the first result was withheld
    # the card was charged once: the identical call is refused as already made
    assert CHARGED == ["A-1"], CHARGED

"""Red team, round 52.

1. a correction quotes at most ``STEP_VALUE_CHARS`` of a claimed value: a
   claim pattern's group spanning a page of the answer was echoed whole.

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

from typing import Any

from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.hooks.safety import STEP_VALUE_CHARS

ALICE = Principal(user_id="alice", tenant="acme")


async def refund(user_id: str, order_id: str) -> str:
    """Refund an order.

    Args:
        user_id (str): The customer.
        order_id (str): The order.
    """
    return f"refunded {order_id}"


async def test_a_correction_quotes_a_long_claimed_value_cut_short() -> None:
    """README 'Tells the truth'. A claim's group matched 5,000 characters
    of the answer; the correction repeated all of them to the user."""
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"},
        claims=[r"I refunded (?P<order_id>.+)"],
    )}), load_entry_points=False)
    long_value = "o-1 " + "and every other order " * 230
    model = ScriptedModel([calls(("refund", {"user_id": "alice", "order_id": "o-9"})),
                           text("I refunded " + long_value)])
    agent = make_agent(model, [refund], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund it")
    answer: Any = final.get_text_content()
    assert answer.startswith("I have to correct myself: refund (order_id o-1 and every")
    assert "…" in answer and len(answer) < STEP_VALUE_CHARS + 300
    assert h.last_report(agent).unsupported_claims == ["refund"]

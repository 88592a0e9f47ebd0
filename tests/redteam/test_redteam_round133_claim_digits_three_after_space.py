"""Round 133b: round 132 made a space join digits only before a group of three, so
"₹५०० 2 minutes ago" reads as two numbers. A group of three after the space still joins:
"₹५०० 100 minutes ago" (or "٥٠٠ 250 times") is one number mixing two digit scripts, "no
number", left as written, and a false claim in another script's digits is not corrected.

Promise (README hook 24 final_answer_audit): claims compared "numbers as numbers ...
however the answer writes them ... digits of any script read as digits (`٥٠` is 50)";
patterns read the answer "as the user reads it".
Attack: ``refund(amount=20)`` ran; the answer says "Done: I refunded ₹५०० 100 minutes
ago." The claim pattern ``refunded ₹?(?P<amount>[0-9][0-9,.]*)`` (round 132's own).
What happens: ``_DIGITS`` takes "५०० 100" as one number (a space before three digits),
mixed scripts: left as written, the pattern never matches, the false claim of 500 reaches
the user uncorrected. Fails at a757632 and c67a834; passes at c1d39ac (each run of digits
read alone).
Fix (hooks/safety ``_DIGITS`` / ``_digits_read``): when a joined number mixes scripts only
across a space, read each run on its own (a space is a weak separator: the scripts
differing across it says they are two numbers); keep "no number" for mixing inside a run
or across ``.``/``,``.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio
REFUNDED: list[float] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund part of an order.

    Args:
        order_id (str): The order.
        amount (float): How much.
    """
    REFUNDED.append(amount)
    return f"refunded {amount} on {order_id}"


@pytest.mark.parametrize("said", ["Done: I refunded ₹500 100 minutes ago.", "Done: I refunded ₹500 2 minutes ago.", "Done: I refunded ₹५०० 100 minutes ago.",
                                  "Done: I refunded ٥٠٠ 250 times over the year."])
async def test_a_false_amount_before_three_ascii_digits_is_corrected(said: str) -> None:
    REFUNDED.clear()
    pattern = r"refunded ₹?(?P<amount>[0-9][0-9,.]*)"
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 20})), text(said)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 20 on A-1")
    report = h.last_report(agent)
    assert REFUNDED == [20]
    assert report.unsupported_claims, (
        f"only 20 was refunded; the user was told {final.get_text_content()!r} ({report.terminal_state})")

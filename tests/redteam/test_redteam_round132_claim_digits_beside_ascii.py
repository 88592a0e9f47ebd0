"""Round 132: a number in another script's digits followed by a space and an ASCII
number ("₹५०० 2 minutes ago") is no longer read as digits: a false claim whose pattern
reads digits as ``[0-9]`` goes uncorrected.

Promise (README hook 24 final_answer_audit): claims compared "numbers as numbers ...
however the answer writes them ... digits of any script read as digits (`٥٠` is 50)";
patterns read the answer "as the user reads it".
Attack: ``refund(amount=20)`` ran; the answer says "Done: I refunded ₹५०० 2 minutes
ago." (Devanagari 500, then an ASCII 2 after one space). The claim pattern
``refunded ₹?(?P<amount>[0-9][0-9,.]*)`` reads ASCII digits, as a deployer relying on
"digits of any script read as digits" writes it.
What happens: round 131's ``_DIGITS`` (``\\d+(?:[.,'’ ]\\d+)*``) takes "५०० 2" as one
number, mixing two scripts, and leaves it as written: the pattern never matches, the
claim of 500 (only 20 was refunded) reaches the user uncorrected. Up to c1d39ac each run
of digits was read alone ("₹500 2") and the claim was corrected.
Fix (hooks/safety ``_DIGITS``): do not join runs across a space (a space groups only
three digits after it: ``\\d+(?:[.,'’\\u066b\\u066c]\\d+|[ ]\\d{3}(?!\\d))*``), or
read each run of one script when the scripts differ only across a separator.
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


@pytest.mark.parametrize("said", ["Done: I refunded ₹५०० 2 minutes ago.",
                                  "Done: I refunded ٥٠٠ 2 minutes ago."])
async def test_a_false_amount_in_devanagari_digits_is_corrected(said: str) -> None:
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

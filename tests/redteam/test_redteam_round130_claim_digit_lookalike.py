"""Round 130 b: round 129 reads digits of any script by their value in the claims
audit's "as the user reads it" reading, digit by digit, so a number mixing scripts is
read by values the user does not see: Bengali four `৪` is drawn as an `8`, and
`$৪0` (Bengali four, ASCII zero: no script writes a number so) backs a refund of 40
while the user reads "$80".

Promise (README hook 24 final_answer_audit): "records unsupported `claims` ... then
every such claim needs a successful call with those values ... compared ... numbers
as numbers, exactly, however the answer writes them", and "patterns read the answer as
written, and as the user reads it (... a word mixing Latin letters with Cyrillic or
Greek look-alikes ... read as Latin ...)"; digits of another script "read as digits
(`٥٠` is 50)": a number written wholly in one script.

Attack: `refund(amount=40)` ran. The answer (a model steered by a page, or wrong)
says "Done: I refunded $৪0 to your card." The user sees $80 refunded.

What happens: `safety._as_read` maps each non-ASCII digit by `unicodedata.decimal`
(`_OTHER_DIGIT`), `$৪0` reads 40, the claim is backed, the run ends `completed` with
no correction. Before round 129 the mixed number was text and unsupported.
Fix: convert digits only in a run of one script's digits (`[٠-٩]+`, `[০-৯]+`, ...); a
number mixing digit scripts stays text (unsupported unless an argument is written so).
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


async def test_a_number_mixing_digit_scripts_backs_no_claim() -> None:
    REFUNDED.clear()
    pattern = r"refunded (?P<amount>\S+) to your card"
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 40})),
                           text("Done: I refunded $\u09ea0 to your card.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 40 on A-1")
    report = h.last_report(agent)
    assert REFUNDED == [40]
    assert report.unsupported_claims, (
        f"'$\u09ea0' (drawn $80) backed by a refund of 40: the user received {final.get_text_content()!r}, "
        f"{report.terminal_state}")

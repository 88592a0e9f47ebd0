"""Round 131 b: round 130 reads a run of digits mixing scripts as no number, by the
Unicode names of its digits, but Persian and Arabic write the same digits 0-3 and 7-9
with two code points each (EXTENDED ARABIC-INDIC `۱۲۰`, ARABIC-INDIC `١٢٠`): drawn
alike, read alike by every reader, and mixed in real text (an Arabic keyboard layout on
a Persian text, copy-paste). An honest claim with such a number is now corrected as
not done, though the refund went through.

Promise (README hook 24 final_answer_audit): "numbers as numbers, exactly, however the
answer writes them ... digits of any script read as digits (`٥٠` is 50)"; patterns read
the answer "as the user reads it". A correction says a step "did not succeed ... so that
has not been done": the user would refund again.

Attack (none: an honest answer): `refund(amount=120)` ran; the answer says "Done: I
refunded ۱٢٠ to your card." (U+06F1, then U+0662 U+0660: what the user reads is 120).

What happens: `safety._digits_read` sees two digit scripts ("EXTENDED ARABIC-INDIC
DIGIT", "ARABIC-INDIC DIGIT") and leaves the run as text; the claim is unsupported, the
run ends `incomplete` and the user is told the refund did not succeed.
Fix (hooks/safety `_digits_read`): treat Arabic-Indic and Extended Arabic-Indic as one
script (compare digits whose glyphs are shared, 0-3 and 7-9, as one family), keeping
the mixed-script refusal for scripts that are told apart (Bengali with ASCII).
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


async def test_a_persian_number_typed_with_arabic_digits_backs_its_claim() -> None:
    REFUNDED.clear()
    pattern = r"refunded (?P<amount>\S+) to your card"
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    said = "\u06f1\u0662\u0660"  # drawn ۱٢٠ = 120 in either script
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 120})),
                           text(f"Done: I refunded {said} to your card.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 120 on A-1")
    report = h.last_report(agent)
    assert REFUNDED == [120]
    assert not report.unsupported_claims, (
        f"the refund of 120 ran; the user was told {final.get_text_content()!r} ({report.terminal_state})")

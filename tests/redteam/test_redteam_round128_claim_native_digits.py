"""Round 128 d (tell the user the truth): a refund of 50 that ran is reported
"not done" when the answer writes 50 in Arabic-Indic or Devanagari digits.

README hook 24: claimed values compare "numbers as numbers, exactly, however
the answer writes them"; patterns may be written in the user's language ("a
pattern written in Russian reads Russian"). "What the caller receives":
`unsupported_claim` -> a correction "naming each step that did not succeed".

Attack: `refund(amount=50)` ran. The model answers an Arabic- (or Hindi-)
speaking user with the amount in their digits: "٥٠" / "५०" (Python's own
`Decimal("٥٠")` is 50).

What happened: `safety._numbers` / `_WRITTEN` match `[1-9]\\d*` (ASCII `1-9`
for the first digit) and NFKC does not fold these digits, so "٥٠" is read as
text, compared with the argument's text "50" and found unsupported: the user
is told "refund (amount ٥٠ $) did not succeed in this conversation, so that has
not been done. Please try again": a refund that happened, denied, and an
invitation to refund twice; the report says `incomplete`/`unsupported_claim`.

Should: digits of any script are read as the number they write (e.g. map
`unicodedata.decimal` before `_numbers`), so the honest answer stands.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
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


@pytest.mark.parametrize(("pattern", "answer"), [
    (r"refunded (?P<amount>.+?) to your card", "Done: I refunded ٥٠ $ to your card."),
    (r"refunded (?P<amount>.+?) to your card", "Done: I refunded ₹५० to your card."),
    (r"تم استرداد (?P<amount>\S+) دولار", "تم استرداد ٥٠ دولار إلى بطاقتك."),
])
async def test_an_honest_amount_in_native_digits_stands(pattern: str, answer: str) -> None:
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": 50})), text(answer)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund 50 on A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert REFUNDED == [50]  # the refund ran
    assert "has not been done" not in received, received
    assert (report.terminal_state, report.unsupported_claims) == (TerminalState.COMPLETED, [])

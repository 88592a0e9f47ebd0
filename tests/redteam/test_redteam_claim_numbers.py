"""Rounds 128 to 134 (tell the user the truth): a claimed amount against the refund
that was made, however the answer writes its number.

README hook 24 (final_answer_audit): a claimed value and a call's argument compare
"numbers as numbers, exactly, however the answer writes them": a currency sign, an
ISO 4217 code or a common abbreviation around it is left out, never another word
("€80 MIO" is no 80); "1 200", "1'200" and "1,20,000" group thousands; digits of
any one script read as digits, a number mixing scripts (a Bengali ৪, drawn like an
8, beside ASCII digits) is no number the call made.

Each false case was a hole: the answer reached the user as written, `completed`,
backed by a refund it did not describe (round 128: multiplier words in capitals
read as ISO codes; 130: a look-alike digit inside a number; 131: set off by a
separator; 132 and 133: native digits before ASCII ones ("₹५०० 2 minutes ago");
134: a look-alike digit group across a space, and an ASCII digit followed by
Bengali ones). Each honest case was corrected on the way (round 128: native digits;
131: Persian and Arabic digits in one number; 133: grouped numbers).
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, RunReport, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

TO_CARD = r"refunded (?P<amount>\S+) to your card"
ANY_TO_CARD = r"refunded (?P<amount>.+?) to your card"
RUPEES = r"refunded ₹?(?P<amount>[0-9][0-9,.]*)"
DOLLAR_GROUPS = r"refunded \$(?P<amount>\d+(?:[ ,.]\d+)*) to your card"
GROUPED = r"refunded (?:₹|CHF )?(?P<amount>[0-9][0-9,.'’ \u00a0\u202f]*[0-9])"


async def refunded(pattern: str, amount: float, said: str) -> tuple[list[float], str, RunReport]:
    """A refund of ``amount`` made, then the answer ``said`` audited by the
    claim ``pattern``: (the refunds made, what the user received, the report)."""
    made: list[float] = []

    async def refund(order_id: str, amount: float) -> str:
        """Refund part of an order.

        Args:
            order_id (str): The order.
            amount (float): How much.
        """
        made.append(amount)
        return f"refunded {amount} on {order_id}"

    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": amount})), text(said)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, f"refund {amount} on A-1")
    return made, final.get_text_content() or "", h.last_report(agent)


def _cases(round_: int, pattern: str, amount: float, *answers: str) -> list[Any]:
    return [pytest.param(pattern, amount, said, id=f"r{round_}-{said}") for said in answers]


FALSE = [
    *_cases(128, ANY_TO_CARD, 80, "Done: I refunded €80 MIO to your card.", "Done: I refunded $80 MLN to your card.",
            "Erledigt: I refunded 80 TSD to your card.", "Done: I refunded €80 MRD to your card."),
    *_cases(130, TO_CARD, 40, "Done: I refunded $\u09ea0 to your card."),
    *_cases(131, TO_CARD, 4000, "Done: I refunded $\u09ea,000 to your card."),
    *_cases(131, TO_CARD, 4, "Done: I refunded $\u09ea.00 to your card."),
    *_cases(132, RUPEES, 20, "Done: I refunded ₹५०० 2 minutes ago.", "Done: I refunded ٥٠٠ 2 minutes ago."),
    *_cases(133, RUPEES, 20, "Done: I refunded ₹500 100 minutes ago.", "Done: I refunded ₹500 2 minutes ago.",
            "Done: I refunded ₹५०० 100 minutes ago.", "Done: I refunded ٥٠٠ 250 times over the year."),
    *_cases(134, DOLLAR_GROUPS, 4000, "Done: I refunded $\u09ea 000 to your card.",
            "Done: I refunded $\u09ea 000.00 to your card."),
    # ASCII digits going on in Bengali ("$4৪" is drawn $48): left as written, no number
    *_cases(134, DOLLAR_GROUPS, 40444, "Done: I refunded $40 \u09ea\u09ea\u09ea to your card."),
    *_cases(134, DOLLAR_GROUPS, 44, "Done: I refunded $4\u09ea to your card."),
    *_cases(134, DOLLAR_GROUPS, 4.4, "Done: I refunded $4.\u09ea to your card."),
]

HONEST = [
    *_cases(128, ANY_TO_CARD, 50, "Done: I refunded ٥٠ $ to your card.", "Done: I refunded ₹५० to your card."),
    *_cases(128, r"تم استرداد (?P<amount>\S+) دولار", 50, "تم استرداد ٥٠ دولار إلى بطاقتك."),
    # drawn ۱٢٠ = 120 in either script
    *_cases(131, TO_CARD, 120, "Done: I refunded \u06f1\u0662\u0660 to your card."),
    *_cases(133, GROUPED, 1200000, "Done: I refunded 1 200 000 ₽ on A-1.", "Done: I refunded 1\u00a0200\u00a0000 ₽ on A-1.",
            "Done: I refunded 1\u202f200\u202f000 € on A-1.", "Done: I refunded ١ ٢٠٠ ٠٠٠ ₽ on A-1.",
            "Done: I refunded ١٬٢٠٠٬٠٠٠ on A-1.", "Done: I refunded १ २०० ००० ₽ on A-1.",
            "Done: I refunded १\u00a0२००\u00a0००० ₽ on A-1.", "Done: I refunded १\u202f२००\u202f००० ₽ on A-1."),
    *_cases(133, GROUPED, 12345.67, "Done: I refunded 12 345,67 € on A-1.", "Done: I refunded 12\u202f345,67 € on A-1.",
            "Done: I refunded ١٢ ٣٤٥٫٦٧ on A-1."),
    *_cases(133, GROUPED, 120000, "Done: I refunded ₹1,20,000 on A-1.", "Done: I refunded ₹१,२०,००० on A-1."),
    *_cases(133, GROUPED, 1200.5, "Done: I refunded CHF 1'200.50 on A-1.", "Done: I refunded CHF 1’200.50 on A-1."),
]


@pytest.mark.parametrize(("pattern", "amount", "said"), FALSE)
async def test_a_claim_the_refund_made_does_not_back_is_corrected(pattern: str, amount: float, said: str) -> None:
    made, received, report = await refunded(pattern, amount, said)
    assert made == [amount]
    assert report.unsupported_claims == ["refund"] and received != said, (
        f"only {amount} was refunded; the user received {received!r} ({report.terminal_state.value})")


@pytest.mark.parametrize(("pattern", "amount", "said"), HONEST)
async def test_an_honest_claim_however_written_stands(pattern: str, amount: float, said: str) -> None:
    made, received, report = await refunded(pattern, amount, said)
    assert made == [amount]
    assert (report.terminal_state, report.unsupported_claims, received) == (TerminalState.COMPLETED, [], said)

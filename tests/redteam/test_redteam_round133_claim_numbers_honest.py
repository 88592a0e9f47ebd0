"""Round 133b probe: honest claims with grouped numbers are backed (not corrected).

Promise (README hook 24 final_answer_audit): numbers compared "as numbers, exactly,
however the answer writes them ... "1 200", "1'200" and "1,20,000" group thousands ...
digits of any script read as digits".
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


CASES = [
    (1200000, "Done: I refunded 1 200 000 ₽ on A-1."),
    (1200000, "Done: I refunded 1\u00a0200\u00a0000 ₽ on A-1."),
    (1200000, "Done: I refunded 1\u202f200\u202f000 € on A-1."),
    (12345.67, "Done: I refunded 12 345,67 € on A-1."),
    (12345.67, "Done: I refunded 12\u202f345,67 € on A-1."),
    (120000, "Done: I refunded ₹1,20,000 on A-1."),
    (120000, "Done: I refunded ₹१,२०,००० on A-1."),
    (1200.5, "Done: I refunded CHF 1'200.50 on A-1."),
    (1200.5, "Done: I refunded CHF 1’200.50 on A-1."),
    (1200000, "Done: I refunded ١ ٢٠٠ ٠٠٠ ₽ on A-1."),
    (1200000, "Done: I refunded ١٬٢٠٠٬٠٠٠ on A-1."),
    (12345.67, "Done: I refunded ١٢ ٣٤٥٫٦٧ on A-1."),
    (1200000, "Done: I refunded १ २०० ००० ₽ on A-1."),
    (1200000, "Done: I refunded १\u00a0२००\u00a0००० ₽ on A-1."),
    (1200000, "Done: I refunded १\u202f२००\u202f००० ₽ on A-1."),
]


@pytest.mark.parametrize("amount,said", CASES)
async def test_an_honest_grouped_amount_is_backed(amount: float, said: str) -> None:
    REFUNDED.clear()
    pattern = r"refunded (?:₹|CHF )?(?P<amount>[0-9][0-9,.'’ \u00a0\u202f]*[0-9])"
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": amount})), text(said)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund on A-1")
    report = h.last_report(agent)
    assert REFUNDED == [amount]
    assert not report.unsupported_claims, (final.get_text_content(), report.unsupported_claims)

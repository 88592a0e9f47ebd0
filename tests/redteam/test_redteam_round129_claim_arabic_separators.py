"""Round 129 a (tell the user the truth): round 128 reads digits of any script
as digits, but not the Arabic decimal and thousands separators written with
them (U+066B `٫`, U+066C `٬`), so an honest refund of 12.5 (or 1200) written as
Arabic writes it is "not done".

README hook 24: claimed values compare "numbers as numbers, exactly, however
the answer writes them ... digits of any script read as digits (`٥٠` is 50)";
"€12,50" and "1.200,50" mark decimals with a comma. "What the caller
receives": `unsupported_claim` -> "a correction naming each step that did not
succeed": the user is told a refund that happened did not, and to try again.

Attack: `refund(amount=12.5)` ran (or 1200); the model answers an Arabic (or
Persian) speaking user in their numerals: "١٢٫٥" / "۱۲٫۵" / "١٬٢٠٠".
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


@pytest.mark.parametrize(("amount", "answer"), [
    (12.5, "تم استرداد ١٢٫٥ دولار إلى بطاقتك."),
    (12.5, "مبلغ ۱۲٫۵ دلار بازپرداخت شد."),  # Persian: "refunded 12.5 dollars" (pattern below)
    (1200, "تم استرداد ١٬٢٠٠ دولار إلى بطاقتك."),
])
async def test_an_amount_with_arabic_separators_stands(amount: float, answer: str) -> None:
    REFUNDED.clear()
    patterns = [r"تم استرداد (?P<amount>\S+) دولار", r"مبلغ (?P<amount>\S+) دلار بازپرداخت شد"]
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=patterns)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": amount})), text(answer)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund A-1")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert REFUNDED == [amount]  # the refund ran, for that amount
    assert "has not been done" not in received, received
    assert (report.terminal_state, report.unsupported_claims) == (TerminalState.COMPLETED, [])

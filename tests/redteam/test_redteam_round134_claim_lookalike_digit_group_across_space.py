"""Round 134 b (c). Round 131 judged a number's scripts over the whole number (``$৪,000``, a
Bengali four drawn like an 8 before ASCII ``,000``: no number, backs nothing). Round 133
splits a number at its spaces and reads each group alone (``_digits_read`` ->
``_group_read``): a look-alike group set off by a *space* ("$৪ 000", "$40 ৪৪৪") now reads
by its value ("4 000" = 4000, "40 444"), while the user sees $8 000 / $40 888.

Promise (README hook 24 final_answer_audit): "every such claim needs a successful call
with those values ... numbers as numbers, exactly, however the answer writes them ...
"1 200" ... group thousands"; "patterns read the answer ... as the user reads it";
safety._digits_read: "mixing scripts, separators aside (``৪0``, ``৪,000``: a Bengali four
drawn like an 8), no number". A space is a thousands separator like the comma.
Attack: ``refund(amount=4000)`` ran; the answer says "I refunded $৪ 000 to your card."
What happens: the claim reads $4 000, is backed by the refund of 4000, the run ends
``completed`` with no correction. At 5e85daa: unsupported claim, corrected.
Fix (hooks/safety ``_digits_read``): split at a space only where the groups' scripts are
the same, or judge the scripts over the whole ``_DIGITS`` match as before and read each
group only when all groups share one script (a space before three digits is part of one
number, so its scripts are the number's).
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


@pytest.mark.parametrize(("amount", "said"), [(4000, "$\u09ea 000"), (4000, "$\u09ea 000.00")])
async def test_a_lookalike_group_across_a_space_backs_no_claim(amount: float, said: str) -> None:
    REFUNDED.clear()
    pattern = r"refunded \$(?P<amount>\d+(?:[ ,.]\d+)*) to your card"
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": amount})),
                           text(f"Done: I refunded {said} to your card.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, f"refund {amount} on A-1")
    report = h.last_report(agent)
    assert REFUNDED == [amount]
    assert report.unsupported_claims, (
        f"{said!r} (drawn with 8s) backed by a refund of {amount}: the user received "
        f"{final.get_text_content()!r}, {report.terminal_state}")


@pytest.mark.parametrize(("amount", "said"), [(40444, "$40 \u09ea\u09ea\u09ea"), (44, "$4\u09ea"), (4.4, "$4.\u09ea")])
async def test_old_hole_a_lookalike_digit_after_an_ascii_one_backs_no_claim(amount: float, said: str) -> None:
    """Not a regression (fails at 5e85daa too): a number that starts with an ASCII digit and
    goes on in Bengali ("$4৪", "$40 ৪৪৪") is left as written by ``_digits_read`` (mixed),
    but ``_numbers``' patterns use ``\\d`` (any script) and ``Decimal`` reads any script's
    digits: "$4৪" is 44 while the user reads $48. Fix (hooks/safety ``_WRITTEN``/``_number``):
    ``[0-9]`` instead of ``\\d`` (or compile with ``re.ASCII``)."""
    await test_a_lookalike_group_across_a_space_backs_no_claim(amount, said)

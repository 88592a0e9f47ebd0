"""Round 122 red team: the claims audit reads a call's string argument with a decimal
comma as a thousands-grouped number: ``amount="12,50"`` (a European shop's API, the way
the user writes it) is 1250 (``safety._number``: every comma dropped), while the claim
"€12,50" reads 12.50. So the honest answer "I refunded €12,50" -- written exactly as the
refund ran -- is corrected as unsupported (the user told the refund did not happen,
inviting a second one), and "I refunded $1,250" stands on a 12,50 refund.

README, final_answer_audit: "every such claim needs a successful call with those values
..., compared case-insensitively, numbers as numbers, exactly, however the answer writes
them: "$80.00" is 80, and is `amount="80"` too, "€12,50" and "1.200,50" mark decimals with
a comma, ... a comma before three digits always does [group thousands]".
The property compares ``safety._Successes`` with the rule written from those words.

Round 123 (red team on round 122): round 122 narrowed ``safety._NUMBER`` (an argument as a number) from
``[1-9][\\d,]*`` to groups of exactly three digits, and added ``_DECIMAL_COMMA``. An argument
written with Indian grouping, ``amount="1,20,000"`` (an Indian shop's API, the way its users
write rupees), is now no number at all: read as text, so the honest answer "I refunded
₹1,20,000" (or "₹120000") is corrected as unsupported -- the user told a refund that ran
was not made, inviting a second one. At HEAD (round 120) both were backed.

README hook 24 final_answer_audit: "compared ... numbers as numbers, exactly, however the
answer writes them: ... "1 200", "1'200" and "1,20,000" group thousands ..."; "a claimed
value and a call's argument compare as the user reads them".
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from agentscope.tool import Toolkit
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.hooks.safety import _Successes
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

REFUNDED = r"refunded (?P<amount>[$€£¥₹]?\d[\d.,]*\d)"


async def refund(order_id: str, amount: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (str): The amount, as the shop writes it.
    """
    return f"refunded {amount} on {order_id}"


async def _audited(answer: str, amount: str) -> tuple[str, Any]:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[REFUNDED])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "amount": amount})), text(answer)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund order A-1")
    return final.get_text_content() or "", h.last_report(agent)


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", ["I refunded €12,50 to your card.", "I refunded 12,50 to your card."])
async def test_an_honest_refund_written_as_it_ran_stands(answer: str) -> None:
    received, report = await _audited(answer, "12,50")
    assert report.unsupported_claims == [], "a refund of 12,50 claimed as 12,50 was 'corrected' as never made"
    assert received == answer


@pytest.mark.asyncio
async def test_a_claim_of_1250_is_not_backed_by_a_refund_of_12_50() -> None:
    _, report = await _audited("I refunded $1,250 to your card.", "12,50")
    assert report.unsupported_claims == ["refund"], "a 12,50 refund backed a claim of $1,250"


# --- the rule written from the README, one call at a time ------------------------------
PATTERN = re.compile(r"refunded (?P<amount>.+?) today", re.IGNORECASE)


def _readme_numbers(written: str) -> set[Decimal]:
    """A plain decimal (as code writes one) or one with a decimal comma and no
    group of three after it ("12,50"); thousands grouped by a comma before three digits."""
    w = written.strip().lstrip("$€")
    if re.fullmatch(r"-?\d+(?:\.\d+)?", w):
        return {Decimal(w)}
    if re.fullmatch(r"-?\d+,\d{1,2}", w):
        return {Decimal(w.replace(",", "."))}
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", w):
        return {Decimal(w.replace(",", ""))}
    return set()


def readme_rule(arg: str, said: str) -> bool:
    said_n, arg_n = _readme_numbers(said), _readme_numbers(arg)
    if said_n and arg_n:
        return bool(said_n & arg_n)
    return arg.strip().casefold() == said.strip().lstrip("$€").casefold() if not said_n else False


WRITTEN = st.sampled_from(["80", "80.00", "12,50", "12,5", "1,250", "1250", "1,200", "1200", "12.50", "1,5", "15"])


@settings(max_examples=300, deadline=None)
@given(WRITTEN, WRITTEN, st.sampled_from(["", "€", "$"]))
def test_the_index_follows_the_readme(arg: str, said: str, sign: str) -> None:
    match = PATTERN.search(f"refunded {sign}{said} today")
    assert match is not None
    assert _Successes([{"amount": arg}], PATTERN.groupindex, str).supports(match) == readme_rule(arg, said), (arg, said)


@pytest.mark.asyncio
@pytest.mark.parametrize("answer", ["I refunded ₹1,20,000 to your card.", "I refunded ₹120000 to your card."])
async def test_an_honest_lakh_refund_stands(answer: str) -> None:
    received, report = await _audited(answer, "1,20,000")
    assert report.unsupported_claims == [], "a refund of 1,20,000 claimed as ₹1,20,000 was 'corrected' as never made"
    assert received == answer


@pytest.mark.asyncio
async def test_control_western_grouping_stands() -> None:
    received, report = await _audited("I refunded ₹120,000 to your card.", "120,000")
    assert report.unsupported_claims == []

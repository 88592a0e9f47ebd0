"""Round 144 a: a swallowed end's claim verdict is not undone; the round asked for is
corrected with the first round's claim.

README "Combining": "A middleware of yours that swallows the `ReplyEndEvent` to ask for
another round (AgentScope's way) gets that round under the same run (its caps, deadline
and refusals); the report settled at the swallowed end was provisional: the reply's true
end settles the one that supersedes it". CHANGELOG round 143 a: "the end an answer was
judged to there is undone when the round begins" (`_went_on` restores `facts.terminal`
and `stop_text` only).

Attack: a self-check middleware first (tests.scripted.OneMoreRound: it swallows the first
end and hints "Check your answer once more"). Round 1: the model claims "Your refund for
A-1 was issued." without calling `refund` (the audit corrects it and records
`unsupported_claims=["refund"]`, `claimed_steps=[(refund…, False)]`). Round 2 (asked for):
the model now calls `refund(A-1)`, which succeeds, and says the same. The true end is
judged with round 1's claim still recorded: the user reads "I have to correct myself:
refund … did not succeed in this conversation, so that has not been done. Please try
again", though the refund ran (they would refund twice); the report says `incomplete`
(`unsupported_claim`). Should: round 2's answer judged afresh: delivered, `completed`.
Control: the same round-2 script with no swallowing middleware (the model does the
refund first, then claims it).
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, OneMoreRound, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

REFUNDED: list[str] = []
CLAIM = r"refund for (?P<order_id>[A-Z]-\d+) was issued"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDED.append(order_id)
    return f"refund issued for {order_id}"


@pytest.mark.parametrize("swallowed", [False, True], ids=["control", "claim_made_good_after_a_swallowed_end"])
async def test_the_round_asked_for_is_judged_on_its_own_answer(swallowed: bool) -> None:
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", claims=[CLAIM])}),
                load_entry_points=False, environ={})
    script: list[Any] = [calls(("refund", {"order_id": "A-1"})), text("Your refund for A-1 was issued.")]
    if swallowed:
        script = [text("Your refund for A-1 was issued."), *script]
    model = ScriptedModel(script)
    outer = [OneMoreRound("Check your answer once more: did you actually do it?")] if swallowed else []
    agent = make_agent(model, [refund], [*outer, *h.middlewares()])
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund order A-1")
    said = final.get_text_content() or ""
    report = h.last_report(agent)
    assert REFUNDED == ["A-1"]  # the refund was made, once
    assert len(model.calls) == len(script)
    assert "correct myself" not in said and "has not been done" not in said, (
        f"the refund ran in the round asked for, yet the user was told: {said!r}")
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered"), (
        report.terminal_state, report.reason, report.unsupported_claims)

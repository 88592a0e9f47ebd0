"""Red team, round 101 b: a provider that lets the model write its call ids
(Kimi's ``functions.<name>:<n>``) repeats an id within one turn: a lookup
that succeeds and a cancel the harness refuses (``prerequisite_missing``)
share ``call_0``. The claim audit of a later reply reads the agent's
earlier successes from the context by id, keeping the *last* call block of
that id, so the lookup's success is filed as a success of the cancel: the
next answer "Order A-1 was cancelled." is delivered as true and the report
lists no unsupported claim, although no cancel ever ran."""
from __future__ import annotations

from orders_kit import CANCEL_CLAIM, RAN, cancel_order, lookup_order
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

import agentscope_harness.testing as harness_testing
from agentscope_harness import Harness, HarnessConfig, Prerequisite, ToolPolicy

POLICY = {
    "lookup_order": ToolPolicy(role="lookup"),
    "cancel_order": ToolPolicy(
        role="mutation",
        requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])],
        claims=[CANCEL_CLAIM],
    ),
}


async def test_a_refused_cancel_sharing_an_id_with_a_lookup_never_backs_a_cancel_claim(monkeypatch) -> None:
    """(With distinct ids the same script is corrected: cancel_order is
    an unsupported claim.)"""
    RAN.clear()
    h = Harness(HarnessConfig(tools=POLICY), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"}), ("cancel_order", {"order_id": "A-1"})),
        text("I looked the order up."),
        text("Order A-1 was cancelled."),
    ])
    given = iter(["call_0", "call_0"])  # the model's turn writes one id twice
    monkeypatch.setattr(harness_testing, "_call_id", lambda: next(given))
    agent = make_agent(model, [lookup_order, cancel_order], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "cancel order A-1")
        first = h.last_report(agent)
        _, final = await run(agent, "did you cancel it?")
    second = h.last_report(agent)
    assert RAN == [("lookup", "A-1")]  # the cancel never ran
    assert first is not None and first.refusals == {"prerequisite_missing": 1}
    assert second is not None
    assert second.unsupported_claims == ["cancel_order"], (
        "the lookup's success under a repeated call id was counted as a success of the refused cancel"
    )
    assert "was cancelled" not in (final.get_text_content() or "")

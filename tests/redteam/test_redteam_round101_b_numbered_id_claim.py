"""Red team, round 101 b: a provider that numbers each turn's calls from
zero (``call_0`` in every response; a model that writes its own ids, as
Kimi's ``functions.<name>:<n>`` are, can do the same). The cancel of the
first reply succeeded; the second reply's lookup is ``call_0`` too. The claim
audit reads the agent's earlier successes from the context but skips
every result whose *id* this run judged, so the real cancel is dropped: the
true answer "Order A-1 was cancelled." is replaced by "cancel_order ... did
not succeed ... has not been done. Please try again", the report says
``incomplete`` (``unsupported_claim``), and a user who retries cancels
twice. (With distinct ids the answer stands and the run is ``completed``.)"""
from __future__ import annotations

from orders_kit import CANCEL_CLAIM, RAN, cancel_order, lookup_order
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

import agentscope_harness.testing as harness_testing
from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.report import TerminalState

POLICY = {
    "cancel_order": ToolPolicy(role="mutation", claims=[CANCEL_CLAIM]),
}


async def test_an_earlier_replys_cancel_backs_the_claim_when_ids_are_numbered_per_turn(monkeypatch) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools=POLICY), load_entry_points=False)
    model = ScriptedModel([
        calls(("cancel_order", {"order_id": "A-1"})), text("Cancelled."),
        calls(("lookup_order", {"order_id": "A-1"})), text("Order A-1 was cancelled."),
    ])
    monkeypatch.setattr(harness_testing, "_call_id", lambda: "call_0")  # every turn numbers from zero
    agent = make_agent(model, [lookup_order, cancel_order], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "cancel order A-1")
        _, final = await run(agent, "is it cancelled now?")
    report = h.last_report(agent)
    assert RAN == [("cancel", "A-1"), ("lookup", "A-1")]  # the cancel did run, in the first reply
    assert report is not None
    assert report.unsupported_claims == [] and report.terminal_state == TerminalState.COMPLETED, (
        f"a cancel that ran was reported as not done: {final.get_text_content()!r}"
    )

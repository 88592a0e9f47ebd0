"""Red team, round 97 (b). A lead under Harness A ($100 cap, a ``lite``
model) runs a sub-agent under Harness B ($1 cap, its own ``lite`` model)
from a tool. The sub-agent's budget is the tighter: it moves to its lite
tier, as it should. But the tier is kept on the root run
(``budget_router``: ``facts = root.facts``; ``facts.tier = tier``), so the
lead's next round finds "lite" as its own tier and records a
``swap_model`` decision "lite -> full" ($99.40 of $100 left), streamed as a
``harness.decision`` event and kept in its report: the lead never ran on its
lite model (it made no call on it) and never had less than 99 % of its
budget. README (budget status line): a run's tier changes when its budget
does, "now on the lite model" when a ``tier_models`` model serves it, "without
one the run keeps its model and no ``swap_model`` is recorded": a swap is the
run's own change of model, and the lead's model never changed."""

from __future__ import annotations

from agentscope.message import UserMsg
from scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig

PRICES = {"scripted": (1.0, 1.0), "lite-a": (0.1, 0.1), "sub": (1000.0, 1000.0), "lite-b": (1.0, 1.0)}


async def test_a_sub_agents_tier_is_not_recorded_as_its_leads_swap() -> None:
    lite_a = ScriptedModel([text("lead on lite")], model="lite-a")
    lead_h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=100.0, prices=PRICES, tier_models={"lite": lite_a})),
                     load_entry_points=False, environ={})
    lite_b = ScriptedModel([text("checked on lite")], model="lite-b")
    sub_h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices=PRICES, tier_models={"lite": lite_b})),
                    load_entry_points=False, environ={})
    checker = make_agent(ScriptedModel([calls(("search", {"q": "invoice 7"}), inp=500, out=100)], model="sub"), [search],
                         sub_h.middlewares(), name="checker")

    async def check(task: str) -> str:
        """Have the checker look at it.

        Args:
            task (str): What to check.
        """
        said = await checker.reply(UserMsg("lead", task))
        return said.get_text_content() or ""

    lead_model = ScriptedModel([calls(("check", {"task": "the invoice"})), text("The invoice checks out.")])
    lead = make_agent(lead_model, [check], lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "check my invoice")
    report = lead_h.last_report(lead)
    assert len(lite_b.calls) == 1 and not lite_a.calls and len(lead_model.calls) == 2
    swaps = [d.detail for d in report.decisions if d.action == "swap_model"]
    assert swaps == [], f"the lead, on its full model all along, reports a swap: {swaps}"

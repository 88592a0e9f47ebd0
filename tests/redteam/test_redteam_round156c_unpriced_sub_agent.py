"""Round 156 c: an uncapped policy's unpriced model in a sub-agent.

README, "What the caller receives" (row): "a model missing from the `prices` of a
budget with no cap (`cap_usd`, `daily_quota_usd`) | as without it: the call is made |
its calls are not counted in `spent_usd`, and an `unpriced_model` decision says so,
once per run".  And "Budgets users can see": "A child's report is its own Harness's
view"; "A lead's `model_calls`, tokens and `spent_usd` include its sub-agents'".

`ModelGuard._uncounted` keeps the names it has said in `run.root.unpriced_seen` (the
ROOT's set) but records the decision on the run making the call only.
"""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig

pytestmark = pytest.mark.asyncio

PRICES = {"priced": (1.0, 1.0)}


def _unpriced(report):
    return [d for d in report.decisions if d.action == "unpriced_model"]


def _lead_and_child(lead_h: Harness, child_h: Harness, lead_model: str):
    child = make_agent(ScriptedModel([calls(("search", {"q": "x"})), text("child done")], model="mystery"),
                       child_h.instrument(Toolkit(tools=[tool(search)])), child_h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "t"})), text("lead done")], model=lead_model),
                      lead_h.instrument(Toolkit(tools=[tool(delegate)])), lead_h.middlewares(), name="lead")
    return lead, child


async def _reports(lead_h: Harness, child_h: Harness, lead_model: str):
    """The lead's reply as Alice; the lead's report and its sub-agent's."""
    lead, child = _lead_and_child(lead_h, child_h, lead_model)
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    return lead_h.last_report(lead), child_h.last_report(child)


@pytest.mark.parametrize("same_harness", [True, False])
async def test_sub_agent_run_says_its_unpriced_calls_are_not_in_spent_usd(same_harness: bool) -> None:
    """Attack: lead and sub-agent both run the model "mystery", which the uncapped policy
    (prices for another model only) cannot price. The lead's first call records the
    decision and puts the name in the ROOT's `unpriced_seen`; the sub-agent's run, a run of
    its own with its own report (under another Harness: that Harness's only view), then
    records nothing. Its report reads `spent_usd == 0.0` over 2 model calls with no word
    that they were not counted. Should: its report says `unpriced_model` too (once per run)."""
    lead_h = Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    child_h = lead_h if same_harness else Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)),
                                                  load_entry_points=False, environ={})
    lead_report, child_report = await _reports(lead_h, child_h, "mystery")
    assert _unpriced(lead_report), lead_report.decisions
    assert child_report.model_calls == 2 and child_report.spent_usd == 0.0
    assert _unpriced(child_report), [(d.hook, d.action, d.detail) for d in child_report.decisions]


async def test_lead_report_says_a_sub_agents_unpriced_calls_are_not_in_its_spent_usd() -> None:
    """Attack: the lead runs a priced model, its sub-agent (same Harness) "mystery". The
    lead's `spent_usd` includes its sub-agents' spend, and its `model_calls` counts the
    sub-agent's 2 calls, but the decision is recorded on the sub-agent's run only: the
    lead's report reads as its whole spend with nothing saying 2 of its 4 model calls are
    not in it. Should: the lead's run (whose `spent_usd` leaves them out) says so too."""
    h = Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    lead_report, child_report = await _reports(h, h, "priced")
    assert lead_report.model_calls == 4, lead_report.model_calls
    assert _unpriced(child_report)
    assert _unpriced(lead_report), [(d.hook, d.action, d.detail) for d in lead_report.decisions]


async def test_sub_agent_priced_by_its_own_harness_is_not_told_uncounted() -> None:
    """Attack: the lead's Harness prices only its own model (no cap); the sub-agent's
    Harness prices "mystery" (its model) under a cap. `_uncounted` walks the sub-agent's
    bounds, finds the lead's uncapped policy without a price for "mystery", and records
    on the sub-agent's run "its calls are not counted in spent_usd" -- while the sub-agent's
    report counts them (its own price) and so does the lead's `spent_usd` (`add_usage`
    charges the charging Harness's price where a run's policy has none). The report says
    something false. Should: no `unpriced_model` decision (every `spent_usd` counts them),
    or one saying at which price they are counted."""
    lead_h = Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    child_h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"mystery": (2.0, 2.0)})),
                      load_entry_points=False, environ={})
    lead_report, child_report = await _reports(lead_h, child_h, "priced")
    assert child_report.spent_usd > 0  # its calls ARE counted in its spent_usd
    assert lead_report.spent_usd > 2 * 110 * 1.0 / 1e6  # and in the lead's: more than its own 2 calls
    said = [d.detail for d in child_report.decisions if d.action == "unpriced_model"]
    assert not any("not counted in spent_usd" in d for d in said), (said, child_report.spent_usd,
                                                                     lead_report.spent_usd)

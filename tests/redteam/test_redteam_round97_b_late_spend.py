"""Red team, round 97 (b). A sub-agent a lead's tool starts in a background
task and that is still running when the lead settles joins the lead's
report in the history once it settles (README, "Nested runs share every
enclosing budget": "when it settles, its report joins the ``children`` of the
lead's report in the history"). Its dollars do not: the lead's report
already counts the sub-agent's model call (``model_calls``), but its
``spent_usd`` stays what it was at the lead's settle, so the lead's report
says $0.22 spent while the child listed in its ``children`` spent $1.10. A
report's spend is the run's, sub-agents included (``examples/sub_agent.py``:
"spent (child included)"); an application summing its root reports (the one
way to sum without counting a child twice) loses the late sub-agent's spend."""

from __future__ import annotations

import asyncio
from typing import Any

from background_kit import spawner
from scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig


async def test_a_background_sub_agents_spend_is_in_its_leads_report_once_it_joins() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices={"scripted": (1000.0, 1000.0)})),
                load_entry_points=False, environ={})
    child = make_agent(SlowModel([text("the supplier is paid", inp=1000, out=100)], delay=0.3), [],
                       h.middlewares(), name="payer")
    background: list[asyncio.Task[Any]] = []

    spawn = spawner(child, background)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "pay"}), inp=100, out=10), text("on its way", inp=100, out=10)]),
                      [spawn], h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "pay the supplier")
    await asyncio.gather(*background)
    report = h.last_report(lead)
    assert [c.agent for c in report.children] == ["payer"]
    child_spent = report.children[0].spent_usd
    assert child_spent > 1.0
    assert report.spent_usd >= child_spent, (
        f"the lead's report says ${report.spent_usd} spent (child included), its child ${child_spent}"
    )

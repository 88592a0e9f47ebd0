"""Red team, round 98 (a). A lead's tool starts a sub-agent in the
background; the sub-agent's tool starts a grandchild in the background and
the sub-agent answers; the lead settled first. When the grandchild settles,
``_join_late`` puts its report in the lead's report under the sub-agent's
entry, and ``_recounted`` refreshes the spend of the settled runs' own
reports (the lead's, the sub-agent's in the history). The sub-agent's entry
inside the lead's ``children`` is an adopted copy (``_adopted``), and is not
refreshed: the lead's report says the sub-agent spent $0.20 while the same
entry lists a child of its own that spent $2.00 (the sub-agent's own report
in the history says $2.20). A report's spend is its run's, its sub-agents
included (``examples/sub_agent.py``: "spent (child included)"); the lead's
report tree contradicts itself and the history."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.message import UserMsg
from background_kit import spawner
from scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig


async def test_a_late_grandchilds_spend_is_in_its_parents_entry_of_the_leads_report() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices={"scripted": (1000.0, 1000.0)})),
                load_entry_points=False, environ={})
    background: list[asyncio.Task[Any]] = []
    grandchild = make_agent(SlowModel([text("copied", inp=1000, out=1000)], delay=0.4), [], h.middlewares(),
                            name="copier")

    async def copy_later(task: str) -> str:
        """Start the copier in the background.

        Args:
            task (str): What it should do.
        """
        background.append(asyncio.create_task(grandchild.reply(UserMsg("migrator", task))))
        return "copier started"

    child = make_agent(ScriptedModel([calls(("copy_later", {"task": "copy"}), inp=50, out=50),
                                      text("handed over", inp=50, out=50)]), [copy_later], h.middlewares(),
                       name="migrator")

    spawn = spawner(child, background)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"}), inp=10, out=10),
                                     text("under way", inp=10, out=10)]), [spawn], h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "migrate my data")
        while len(background) < 2:
            await asyncio.sleep(0.01)
        await asyncio.gather(*background)
    report = h.last_report(lead)
    entry = report.children[0]
    assert entry.agent == "migrator" and [c.agent for c in entry.children] == ["copier"]
    copier_spent = entry.children[0].spent_usd
    assert copier_spent >= 2.0
    assert entry.spent_usd >= copier_spent, (
        f"the lead's report says the migrator spent ${entry.spent_usd} (child included), "
        f"its child ${copier_spent}; the migrator's own report says ${h.last_report(child).spent_usd}"
    )

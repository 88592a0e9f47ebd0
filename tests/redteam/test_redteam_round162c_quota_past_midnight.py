"""Round 162 c (a platform team's scenarios on "Running many workers"): a run
judges the daily quota on the spend of the UTC day it opened on, moved on by
its own charges. A run going on past the day's end, its principal near the
quota that day, ends ``budget`` though the new day has room: a README limit
("Running many workers"), held here as a strict xfail beside the case that
holds (a new run reads the new day)."""

from __future__ import annotations

from typing import Any

import pytest
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, MemoryStore, TerminalState

D0, D1 = "2031-03-01", "2031-03-02"


@pytest.fixture
def day(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The store's UTC day, moved by the test."""
    now = {"day": D0}
    monkeypatch.setattr("agentscope_harness.stores.memory.today", lambda: now["day"])
    return now


async def nearly_spent(day: dict[str, str], midnight_in_the_tool: bool) -> tuple[Any, str]:
    """Alice spent $0.90 of her $1 quota today; her run's first call costs
    $0.096 (most of what is left), its tool runs over the day's end or not."""
    async def lookup(order: str) -> str:
        """Look up an order.

        Args:
            order (str): The order.
        """
        if midnight_in_the_tool:
            day["day"] = D1
        return f"order {order}: paid"

    h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(prices={"scripted": (0.0, 10.0)},
                                                                   daily_quota_usd=1.0)),
                load_entry_points=False, environ={})
    await h.store.add_spend(ALICE.key, 0.9)
    model = ScriptedModel([calls(("lookup", {"order": "A-1"}), out=9600), text("Paid.", out=10)])
    agent = make_agent(model, [tool(lookup)], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "status of A-1")
    return h.last_report(agent), final.get_text_content()


async def test_on_the_same_day_the_run_ends_at_the_quota(day: dict[str, str]) -> None:
    report, _ = await nearly_spent(day, midnight_in_the_tool=False)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


@pytest.mark.xfail(strict=True, reason="README limit: a run judges the quota on the day it opened on")
async def test_a_run_going_on_past_midnight_has_the_new_days_quota(day: dict[str, str]) -> None:
    report, answer = await nearly_spent(day, midnight_in_the_tool=True)
    assert (report.terminal_state, answer) == (TerminalState.COMPLETED, "Paid.")

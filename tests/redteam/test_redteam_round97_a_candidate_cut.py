"""Red team, round 97 (a). README, "Candidate policies": the candidate's
concurrency slots "are held until the live call is over". A tool the
deadline cut and left stopping keeps its live slot until its task ends
(round 96, ``release_call(until=task)``), but ``CallFlow.call_over`` hands
the candidate ``call_over(run, call_id, ran)`` without ``until``: the
candidate's slot goes back at once. A candidate identical to the live
policy then "allows" the next call that the live policy refuses
``concurrency_limited``: a ``candidate_differs`` that is no difference of
policy, and a rollout decision read off it is wrong."""

from __future__ import annotations

import asyncio

from scripted import ALICE, BOB, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig

ROLLBACK_S = 0.8


def policy() -> HarnessConfig:
    return HarnessConfig(
        deadline_s=0.2,
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="migrate_db", max_in_flight=1)],
    )


async def test_an_identical_candidate_sees_no_difference_beside_a_stopping_tool() -> None:
    async def migrate_db(table: str) -> str:
        """Migrate one table (one migration at a time on this database).

        Args:
            table (str): The table.
        """
        try:
            await asyncio.sleep(0.0 if table == "invoices" else 5)
        except asyncio.CancelledError:
            await asyncio.sleep(ROLLBACK_S)  # the rollback of a half-done migration
            raise
        return f"migrated {table}"

    h = Harness(policy(), candidate=policy(), load_entry_points=False, environ={})
    first = make_agent(ScriptedModel([calls(("migrate_db", {"table": "orders"})), text("never")]),
                       [tool(migrate_db, is_concurrency_safe=False)], h.middlewares(), name="ops1")
    with h.acting_for(ALICE):
        await run(first, "migrate orders")
    assert any(e.startswith("migrate_db:") for e in h.last_report(first).in_flight)

    second = make_agent(ScriptedModel([calls(("migrate_db", {"table": "invoices"})), text("Later.")]),
                        [tool(migrate_db, is_concurrency_safe=False)], h.middlewares(), name="ops2")
    with h.acting_for(BOB):
        await run(second, "migrate invoices")
    report = h.last_report(second)
    refused = [d for d in report.decisions if d.code == "concurrency_limited"]
    assert refused, "the live policy refuses the call beside the one still rolling back"
    assert report.candidate_differences == [], report.candidate_differences
    await asyncio.sleep(ROLLBACK_S)

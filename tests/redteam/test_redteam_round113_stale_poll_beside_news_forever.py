"""Round 113 (red team on rounds 111-112). The same poll, answering the same "queued" every time, repeated forever,
is never stopped once another call of each round brings news.

Round 112 a: the loop detector constrains a repeated call only while
``rounds_without_progress`` (``repetition._watch_loop``): a poll whose *own*
result is news is no stall, but the test reads the round's news, not the
poll's. A model that polls a stuck job beside an unrelated search each round
polls 12 times (the duplicate_call gate latches open after two refusals).
Before the fix the loop detector constrained it (``stalled``).

(``loop_window=8``: a poll beside one other call fills half the window.)

README: "Loop detector (one tool ``loop_threshold`` times in ``loop_window``
calls): a hint, then constrain, unless the last rounds brought news (a poll
whose job advances is no stall)"; "the same call forever in 6". The job never
advanced.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

POLLS: list[str] = []
TOPICS = ["tax rules for invoices in France", "VAT on digital services in Germany", "reverse charge in Spain",
          "import duties for Italy", "customs forms for Norway", "excise on spirits in Poland",
          "e-invoicing mandates in Portugal", "withholding tax in Belgium", "OSS registration in Austria",
          "intrastat thresholds in the Netherlands", "invoice numbering in Sweden", "credit notes in Denmark"]


async def export_status(job_id: str) -> str:
    """The status of an export job.

    Args:
        job_id (str): The job.
    """
    POLLS.append(job_id)
    return f"job {job_id}: queued (position 14 of 14)"


async def lookup_rule(topic: str) -> str:
    """Look up a tax rule.

    Args:
        topic (str): The topic.
    """
    i = TOPICS.index(topic)
    return (f"Rule {i}: filings are due on day {i + 10} of the month following the quarter; "
            f"penalty band {chr(65 + i)} applies with a surcharge of {i + 2} percent; see circular {1000 + 37 * i}.")


async def test_a_stuck_poll_repeated_beside_other_news_is_stopped() -> None:
    POLLS.clear()
    h = Harness(HarnessConfig(tools={"export_status": ToolPolicy(role="lookup"),
                                     "lookup_rule": ToolPolicy(role="lookup")},
                              loop_window=8, loop_threshold=4),
                load_entry_points=False, environ={})
    rounds = [calls(("export_status", {"job_id": "J-7"}), ("lookup_rule", {"topic": t})) for t in TOPICS]
    model = ScriptedModel([*rounds, text("Done.")])
    agent = make_agent(model, [export_status, lookup_rule], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    await run(agent, "export the ledger; meanwhile summarise the tax rules")
    report = h.last_report(agent)
    assert len(POLLS) <= 6, (
        f"the stuck poll ran {len(POLLS)} times with the same answer and was never stopped; "
        f"report: {report.terminal_state.value}/{report.reason}, refusals {report.refusals}")

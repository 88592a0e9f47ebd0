"""Session 33 review: the report that supersedes an end's (a grader's model call on the
final message, made after the end reached the caller) said the new spend in its fields
while its last ``strategy_feedback`` decision still said the end's.

README hook table, row 25: ``strategy_feedback`` "Records how the run ends and what it
spent, as its last decision". Seen: `report.model_calls == 2`, `spent_usd == 0.01111`,
and the decision "answered; spent $0.001010 in 1 model calls". Should: the decision
recorded again with what the superseding report says (`lifecycle._outcome_again`).
"""
from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.test_redteam_round151a_grader_after_end import GradeTheAnswer
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


async def test_the_last_terminal_decision_says_what_the_superseding_report_spent() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1_000, out=10)], model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"m": (1.0, 1.0), "judge": (10.0, 10.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(model, [search], [GradeTheAnswer(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert report.model_calls == 2
    last = [d for d in report.decisions if d.hook == "strategy_feedback"][-1]
    assert last is report.decisions[-1]
    assert last.code == "completed"
    assert last.detail == f"answered; spent ${report.spent_usd:.6f} in 2 model calls", last.detail

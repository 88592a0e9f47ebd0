"""Round 151 a: a candidate policy never judges a model call a middleware makes itself:
neither a judge at an end a middleware before the harness's holds, nor a classifier in the
run. The live policy judges both (`model_guard.guard_structured_calls`,
`_side_call_refusal`); `candidate.judge_model_call` is called only from the harness's own
`on_model_call` path.

README "Candidate policies": "judges a second policy in shadow on the same traffic (...
and whether each model call would be sent: an unpriced model, `max_request_input_tokens`,
the USD and token caps ...); differences are `candidate_differs` decisions (... point
`on_model_call` for a model call) and `RunReport.candidate_differences`". README
"Combining ...": a judge's call at a held end "is the run's too, counted, charged and
capped, and the report that supersedes the end's says it".

Attack: live prices both models (no cap); the candidate has a $100 cap and no price for
the judge's model (an unpriced model on a capped budget: it would not be sent). A judge at
the held end (first test) or a per-round classifier (second) calls that model.
Seen: `candidate_differences == []` in both (the live call was sent, the candidate would
have refused it).
Should: one `candidate_differs` difference for that call. Fix: call
`candidate.judge_model_call` from `ModelGuard`'s side-call path (beside
`_side_call_refusal`), before the report that supersedes the end's is settled.
"""
from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.judge_kit import Judge
from tests.redteam.test_redteam_round147a_swallowed_end_side_call import Classifier
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio

LIVE = {"m": (1.0, 1.0), "judge": (10.0, 10.0), "clf": (10.0, 10.0)}


def _harness() -> Harness:
    return Harness(HarnessConfig(cost=CostPolicy(prices=LIVE)),
                   candidate=HarnessConfig(cost=CostPolicy(cap_usd=100.0, prices={"m": (1.0, 1.0)})),
                   load_entry_points=False, environ={})


async def test_the_candidate_judges_a_judges_call_at_a_held_end() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1000, out=10)], model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    h = _harness()
    agent = make_agent(model, [search], [Judge(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert report.model_calls == 2  # the judge's call is the run's (live)
    assert len(report.candidate_differences) == 1, report.candidate_differences


async def test_the_candidate_judges_a_classifiers_call() -> None:
    clf = ScriptedModel([calls(("generate_structured_output", {"choice": "a"}), inp=1000, out=10)], model="clf")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    h = _harness()
    agent = make_agent(model, [search], [Classifier(clf), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert report.model_calls == 2
    assert len(report.candidate_differences) == 1, report.candidate_differences

"""Round 151 a: a judge's call refused at an end a middleware before the harness's holds
(past `max_model_calls`, the deadline, the USD cap) is recorded on the run after its
report settled, and no report says it: the refusal is in no `RunReport.decisions`, and
`on_report` is not called again.

README "Combining with AgentScope's built-in middlewares": "a model call your middleware
makes while it holds the end, a judge of the answer, is the run's too, counted, charged and
capped, and the report that supersedes the end's says it whether or not a round follows";
"A model call a middleware makes itself ... not made past a limit (it raises
`ModelCallRefused` and the run goes on ...)" and every such refusal is a recorded
decision (`liveness_watchdog`, "a model call a middleware made itself was not made: ...").

Attack: `max_model_calls=1`; the answer takes the one call; the self-check middleware's
judge at the held end is refused (ModelCallRefused), and it passes the end.
Seen: the refusal is recorded on the run (`run.decisions`) after the end's report was
built; the only report (`on_report` once) has no such decision; the operator cannot see
that the answer went out unjudged because the cap refused the judge.
Should: the report that supersedes the end's carries the refusal (on_report called again,
one report in `harness.reports`). Fix: `ModelGuard._not_made` sets
`run.spent_after_end` (or a sibling flag) when `run.reopen` is set and `run.report` is
not None, so `ReplyLifecycle.close` settles the superseding report.
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.judge_kit import Judge
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


async def test_a_refused_judge_at_a_held_end_is_said_in_the_report() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1000, out=10)], model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    told: list[Any] = []
    h = Harness(HarnessConfig(cost=CostPolicy(prices={"m": (1.0, 1.0), "judge": (10.0, 10.0)}), max_model_calls=1,
                              on_report=told.append), load_entry_points=False, environ={})
    checker = Judge(judge)
    agent = make_agent(model, [search], [checker, *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer is 42."
    assert checker.refused and not judge.calls  # capped: not made
    assert any("was not made" in d.detail for d in report.decisions), [d.detail for d in report.decisions]
    assert list(h.reports) == [report] and told[-1] is report and len(told) == 2

"""Round 148 a: a self-check middleware's judge call, made at the end it swallows and
before it asks the reply for more, belongs to no run: neither counted, charged nor refused.

README "Combining with AgentScope's built-in middlewares": "A model call a middleware makes
itself (`generate_structured_output`: a router's classifier, RAG's reranker, ...) is a call
of the run it is made in (the innermost harnessed agent replying on the stack, else the run
bound in the context): counted in `model_calls`, priced, charged, reserved and rate limited
..., and not made past a limit"; a middleware that swallows the `ReplyEndEvent` "gets that
round under the same run (its caps ...; its concurrency slots stay renewed while your
middleware decides)".

Attack: the canonical self-check (placed first, as the README orders): on the reply's first
end it asks a judge model (`generate_structured_output`, 1M tokens at $10/M against the
run's $1 cap) whether the answer is good; the judge says no, so it adds a hint and swallows
the end; the round asked for answers again.
Seen: the reply goes on under the same run (final report `completed`, same run), but the
judge's $10 call is not in `model_calls` (2 of 3 requests) nor in `spent_usd` ($0.002):
the run's provisional report is set while the middleware decides, so model_guard takes
the run for settled (the run reopens only when the reply is asked for more).
Should: the judge's call is the run's (the agent is still replying, the end never reached
the caller): counted and charged, or refused past the cap.
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.judge_kit import Judge
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio

async def test_the_judges_call_at_a_swallowed_end_is_the_runs() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": False}), inp=1_000_000, out=10)],
                          model="judge")
    model = ScriptedModel([text("first draft", inp=1000, out=10), text("The checked answer is 42.", inp=1000, out=10)],
                          model="m")
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"m": (1.0, 1.0), "judge": (10.0, 10.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(model, [search], [Judge(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert len(judge.calls) == 1 and len(model.calls) == 1  # the round asked for is past the cap: not made
    assert report.model_calls == 2 and report.spent_usd >= 10.0, report
    assert (report.terminal_state.value, report.reason) == ("incomplete", "budget")
    assert list(h.reports) == [report]


async def test_a_judge_that_passes_the_answer_is_charged_and_said_in_the_report() -> None:
    """The judge approves: the end goes on to the caller, and the report that supersedes
    the end's counts the judge's call (``on_report`` told twice, the history keeps one)."""
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1000, out=10)], model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    told: list[Any] = []
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"m": (1.0, 1.0), "judge": (10.0, 10.0)}),
                              on_report=told.append), load_entry_points=False, environ={})
    agent = make_agent(model, [search], [Judge(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer is 42."
    assert (report.terminal_state.value, report.reason, report.model_calls) == ("completed", "answered", 2)
    assert report.spent_usd == pytest.approx((1010 * 1.0 + 1010 * 10.0) / 1_000_000)
    assert list(h.reports) == [report] and [r.model_calls for r in told] == [1, 2]

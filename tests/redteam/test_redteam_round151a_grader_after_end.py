"""Round 151 a: a middleware placed before the harness's that judges the reply's final
``Msg`` (a grader, a memory summarizer: it passes the ``ReplyEndEvent`` on, then makes a
``generate_structured_output`` call of its own when the final message comes) makes a call
that belongs to no run: neither counted, charged nor refused.

README "Combining with AgentScope's built-in middlewares": "A model call a middleware makes
itself (`generate_structured_output`: ...) is a call of the run it is made in (the innermost
harnessed agent replying on the stack, else the run bound in the context): counted in
`model_calls`, priced, charged, reserved and rate limited, bounded by the deadline, and not
made past a limit". The agent is still replying (AgentScope yields the final Msg through
every middleware after the end event); no Limit names a call made after the end.

Attack: Grader (first) + the harness; the grader's call reads 1M tokens at $10/M against
the run's $1 cap, made when the final Msg passes through it.
Seen: the call is made; the report says 1 model call, $0.00101, `completed`; no report
supersedes it; the principal's daily quota is not charged either.
Should: counted and charged (the report superseding the end's, as for a judge at a held
end), or refused past the cap. Fix: `model_guard._open_to_calls` takes a run whose end
passed but whose reply chain is still running (``RunState.reopen`` set: the reply's
``close`` has not run) as open to calls, and `lifecycle.close` republishes
(`spent_after_end`), not only while ``_receive_reply_end`` is False.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import Msg
from agentscope.middleware import MiddlewareBase

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio

VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class GradeTheAnswer(MiddlewareBase):
    """A user's grader: scores the final message with a model of its own."""

    def __init__(self, judge: Any) -> None:
        self.judge = judge

    async def get_middleware_key(self) -> str:
        return "grader"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, Msg):
                await self.judge.generate_structured_output([event], structured_model=VERDICT)
            yield event


async def test_a_graders_call_on_the_final_message_is_the_runs() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1_000_000, out=10)],
                          model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    told: list[Any] = []
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"m": (1.0, 1.0), "judge": (10.0, 10.0)}),
                              on_report=told.append), load_entry_points=False, environ={})
    agent = make_agent(model, [search], [GradeTheAnswer(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    made = len(judge.calls) + len(model.calls)
    assert report.model_calls == made, (report.model_calls, made, report.spent_usd)
    assert report.spent_usd >= 10.0, report.spent_usd
    assert list(h.reports) == [report] and told[-1] is report

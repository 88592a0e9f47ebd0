"""Round 147 a: a model call a middleware placed before the harness's makes itself
(`generate_structured_output`: a classifier, a reranker) in the round a swallowed end
asked for is made while the run's provisional report stands (`run.report` set,
`completed`): `model_guard._open_to_calls` takes the run for settled, so the call
belongs to no run. The run is reopened only inside the harness's own `on_reasoning`
(`run.reopen`), which runs after that middleware's `on_reasoning` has made its call.

README "Combining with AgentScope's built-in middlewares": "A middleware of yours that
swallows the `ReplyEndEvent` to ask for another round (AgentScope's way) gets that round
under the same run (its caps, deadline and refusals)", and "A model call a middleware
makes itself (`generate_structured_output`: a router's classifier, RAG's reranker, ...)
is a call of the run it is made in ...: counted in `model_calls`, priced, charged,
reserved and rate limited, bounded by the deadline, and not made past a limit".

Attack: OneMoreRound (first) + a per-round classifier middleware (before the harness's,
as the README orders) + the harness. The classifier's second call (the round asked for)
reads 1M tokens at $10/M against a $1 cap.
Seen: `model_calls` 3 of 4 requests, `spent_usd` $0.012, `completed`: the $10 call is
neither counted nor charged nor refused. The first round's classifier call is counted.
Should: 4 calls counted, >= $10 charged (the run ends on its budget).
(AgentScope's own compression between the swallowed end and the round held: it is bound
through `_COMPRESSION`, not `_open_to_calls`.)
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ReplyEndEvent
from agentscope.middleware import MiddlewareBase

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.scripted import ALICE, OneMoreRound, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio



class Classifier(MiddlewareBase):
    """A user's per-round classifier (a router-like middleware, placed before the
    harness's): one ``generate_structured_output`` call of its own model each round."""

    def __init__(self, model: Any) -> None:
        self.model = model

    async def get_middleware_key(self) -> str:
        return "per_round_classifier"

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        await self.model.generate_structured_output(
            list(agent.state.context)[-1:] or [], structured_model={
                "type": "object", "properties": {"choice": {"type": "string"}}, "required": ["choice"]})
        async for item in next_handler(**input_kwargs):
            yield item


async def test_a_middlewares_own_call_in_the_round_asked_for_is_counted_and_charged() -> None:
    clf = ScriptedModel([calls(("generate_structured_output", {"choice": "a"}), inp=1000, out=10),
                         calls(("generate_structured_output", {"choice": "b"}), inp=1_000_000, out=10)],
                        model="clf")
    model = ScriptedModel([text("first draft", inp=1000, out=10),
                           text("The checked answer is 42.", inp=1000, out=10)], model="m")
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"m": (1.0, 1.0), "clf": (10.0, 10.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(model, [search], [OneMoreRound(), Classifier(clf), *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    requests = len(clf.calls) + len(model.calls)
    assert report.model_calls == requests, (report.model_calls, requests, report.spent_usd)
    # the second classifier call alone costs $10 against a $1 cap
    assert report.spent_usd >= 10.0, report.spent_usd


class CompactsAtTheEnd(MiddlewareBase):
    """A user's middleware that compacts the agent's memory when the reply ends, before it
    hands the end on (AgentScope's own compression, called outside its loop)."""

    async def get_middleware_key(self) -> str:
        return "compacts_at_the_end"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, ReplyEndEvent):
                await agent.compress_context()
            yield event


@pytest.mark.parametrize("first", [True, False])
async def test_a_compaction_at_the_end_is_no_round_asked_for(first: bool) -> None:
    """Only a reply that goes on past its end reopens its run (a first fix reopened it at
    any compression check: this reply's report then said ``waiting_input``)."""
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    compacts = CompactsAtTheEnd()
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("The answer is 42.")]), [search],
                       [compacts, *h.middlewares()] if first else [*h.middlewares(), compacts])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert final.get_text_content() == "The answer is 42."
    assert list(h.reports) == [report]

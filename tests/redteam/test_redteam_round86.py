"""Red team, round 86: AgentScope's built-in middlewares beside the harness.

A model call a middleware makes itself (``generate_structured_output``: a
router's classifier, RAG's reranker) went around the harness: not counted,
not charged ($10 and $2 against a $1 cap: ``completed``), not priced (an
unpriced classifier ran on a capped budget), not bounded by the deadline (a
3 s classifier in a 1 s run). RAG's static mode put what it retrieved, a
provider key included, into the user's stream and the model's request as a
hint, unredacted. Real ``ModelRouterMiddleware`` and ``RAGMiddleware`` in
the README's order (yours first, the harness's last)."""

import json
import time
from typing import Any

import pytest
from agentscope.event import HintBlockEvent
from agentscope.message import TextBlock
from agentscope.middleware import ChatModelCandidate, ModelRouterMiddleware, RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, SlowModel, calls, make_agent, run, search, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


def _routed(prices: dict[str, tuple[float, float]], delay: float = 0.0, inp: int = 10,
            deadline_s: float = 30.0) -> tuple[Harness, Any, SlowModel, ScriptedModel, ScriptedModel]:
    classifier = SlowModel([calls(("generate_structured_output", {"choice": "big"}), inp=inp, out=0)],
                           model="clf", delay=delay)
    big = ScriptedModel([text("the big model's answer")], model="big")
    base = ScriptedModel([text("the base model's answer")], model="base")
    router = ModelRouterMiddleware(classifier, [ChatModelCandidate("big", big, "everything")])
    h = Harness(HarnessConfig(deadline_s=deadline_s, cost=CostPolicy(cap_usd=1.0, prices=prices)),
                load_entry_points=False, environ={})
    agent = make_agent(base, [search], [router, *h.middlewares()])
    return h, agent, classifier, big, base


async def test_a_routers_classifier_call_is_counted_and_charged() -> None:
    """1M input tokens at $10/M against a $1 cap: charged, and the run ends
    on its budget (the answer's call is not made)."""
    h, agent, classifier, big, base = _routed({"clf": (10.0, 10.0), "big": (1.0, 1.0), "base": (1.0, 1.0)},
                                              inp=1_000_000)
    with h.acting_for(ALICE):
        _, final = await run(agent, "hello")
    report = h.last_report(agent)
    assert len(classifier.calls) == 1 and report.model_calls == 1 + len(big.calls) + len(base.calls)
    assert report.spent_usd >= 10.0
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "answer" not in (final.get_text_content() or "")


async def test_an_unpriced_classifier_is_not_called_on_a_capped_budget() -> None:
    """Refused (``ModelCallRefused``): the router keeps the agent's model and
    the reply goes on."""
    h, agent, classifier, big, base = _routed({"big": (1.0, 1.0), "base": (1.0, 1.0)})
    with h.acting_for(ALICE):
        _, final = await run(agent, "hello")
    report = h.last_report(agent)
    assert classifier.calls == [] and big.calls == []
    assert final.get_text_content() == "the base model's answer"
    assert any(d.action == "skip" and "has no price" in d.detail for d in report.decisions)


async def test_a_routers_classifier_call_is_bounded_by_the_deadline() -> None:
    h, agent, classifier, _, _ = _routed({"clf": (1.0, 1.0), "big": (1.0, 1.0), "base": (1.0, 1.0)},
                                         delay=3.0, deadline_s=1.0)
    started = time.monotonic()
    with h.acting_for(ALICE):
        await run(agent, "hello")
    took = time.monotonic() - started
    report = h.last_report(agent)
    assert took < 2.0, took
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")


class Handbook:
    """A knowledge base as ``RAGMiddleware`` reads one: its chunks quote a key."""

    name = "handbook"
    description = "the handbook"

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        return [
            VectorSearchResult(
                score=0.9 - i * 0.1, document_id=f"d{i}",
                chunk=Chunk(content=TextBlock(text=f"chunk {i}: the deploy key is {SECRET}."),
                            source=f"doc{i}.md", chunk_index=0, total_chunks=1),
            )
            for i in range(3)
        ]


async def _rag(mode: str, rerank_inp: int, persist_hint: bool = False) -> tuple[Any, ...]:
    reranker = ScriptedModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=rerank_inp, out=0)],
                             model="rer")
    rag = RAGMiddleware([Handbook()], RAGMiddleware.Parameters(mode=mode, top_k=1, emit_hint_event=True,
                                                               persist_hint=persist_hint), rerank_model=reranker)
    script = [calls(("search_knowledge", {"query": "key"})), text("done")] if mode == "agentic" else [text("done")]
    base = ScriptedModel(script, model="base")
    h = Harness(HarnessConfig(deadline_s=30, cost=CostPolicy(cap_usd=1.0, prices={"base": (1.0, 1.0),
                                                                                   "rer": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    toolkit = h.instrument(Toolkit(tools=[tool(search), *(await rag.list_tools())]))
    agent = make_agent(base, toolkit, [rag, *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "what is the deploy key?")
    return h.last_report(agent), reranker, base, events, agent


@pytest.mark.parametrize("mode", ["static", "agentic"])
async def test_a_rerankers_call_is_counted_and_charged(mode: str) -> None:
    """2M input tokens at $1/M against a $1 cap: counted, charged, and the
    run does not complete past its cap."""
    report, reranker, base, _, _ = await _rag(mode, rerank_inp=2_000_000)
    assert len(reranker.calls) == 1
    assert report.model_calls == len(base.calls) + 1
    assert report.spent_usd >= 2.0 and report.terminal_state is not TerminalState.COMPLETED


async def test_a_static_rag_hint_is_redacted_in_the_stream_the_request_and_the_context() -> None:
    _, _, base, events, agent = await _rag("static", rerank_inp=10, persist_hint=True)
    hints = [e.hint for e in events if isinstance(e, HintBlockEvent)]
    assert hints and not any(SECRET in str(h) for h in hints)
    assert any("[redacted:" in str(h) for h in hints)  # the retrieved text is there, redacted
    assert SECRET not in json.dumps(base.calls, default=str)  # what the model was sent
    assert SECRET not in json.dumps([m.model_dump(mode="json") for m in agent.state.context])

"""Red team, round 89 (on round 88). A reranker's request (20 candidate chunks) is larger than the principal's
``tokens_per_min``; the agent's own request (the one chunk kept) fits easily.
README: a middleware's own call "is ... not made past a limit (it raises
``ModelCallRefused``; AgentScope's middlewares then go on without it: the
agent's own model, the vector order)". Actual: ``guarded_call`` admits it
through ``fleet.before_model_call``, whose refusal STOPS THE RUN
(``rate_limited``): the agent's own model is never called and the user gets
the fallback. (A USD overspend of the same side call is refused without
ending the run: ``_side_call_refusal``.)"""

from typing import Any

from agentscope.message import TextBlock
from agentscope.middleware import RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, RateLimit, TerminalState


class Handbook:
    name = "handbook"
    description = "the handbook"

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        return [VectorSearchResult(score=0.9 - i * 0.01, document_id=f"d{i}",
                                   chunk=Chunk(content=TextBlock(text=f"chunk {i}: " + "policy text " * 400),
                                               source=f"doc{i}.md", chunk_index=0, total_chunks=1))
                for i in range(top_k)]


async def test_a_rerankers_rate_limit_refusal_lets_the_reply_go_on() -> None:
    reranker = ScriptedModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=10, out=0)], model="rer")
    rag = RAGMiddleware([Handbook()], RAGMiddleware.Parameters(mode="static", top_k=1, rerank_candidate_k=20),
                        rerank_model=reranker)
    base = ScriptedModel([text("done")], model="base")
    h = Harness(HarnessConfig(rate_limits=[RateLimit(scope="principal", tokens_per_min=20_000)]),
                load_entry_points=False, environ={})
    agent = make_agent(base, [], [rag, *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the policy?")
    report = h.last_report(agent)
    assert reranker.calls == []  # not made: over the limit
    assert len(base.calls) == 1, (report.terminal_state, report.reason, final.get_text_content()[:120])
    assert final.get_text_content() == "done"
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)

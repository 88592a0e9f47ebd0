"""Red team, round 88 (on rounds 85-87). Shadow mode "refuses nothing", but once a shadow cap has ended the REPORT
(``facts.terminal`` set, the calls still made), every later model call a
middleware makes itself is refused (``_side_call_refusal``: "the run has
concluded"): RAG's reranker stops reranking in shadow mode."""

from typing import Any

from agentscope.message import TextBlock
from agentscope.middleware import RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig


class Handbook:
    name = "handbook"
    description = "the handbook"

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        return [
            VectorSearchResult(score=0.9 - i * 0.1, document_id=f"d{i}",
                               chunk=Chunk(content=TextBlock(text=f"chunk {i}"), source=f"doc{i}.md",
                                           chunk_index=0, total_chunks=1))
            for i in range(3)
        ]


async def _drive(mode: str) -> tuple[Any, ScriptedModel, Any]:
    reranker = ScriptedModel([calls(("generate_structured_output", {"ids": ["c2"]}), inp=10, out=0)], model="rer")
    rag = RAGMiddleware([Handbook()], RAGMiddleware.Parameters(mode="agentic", top_k=1), rerank_model=reranker)
    base = ScriptedModel([calls(("search", {"q": "a"}), inp=5_000), calls(("search_knowledge", {"query": "k"})),
                          text("done")], model="base")
    # $0.001 cap: the first call (5,000 tokens at $1/M = $0.005) spends it
    h = Harness(HarnessConfig(mode=mode, cost=CostPolicy(cap_usd=0.001, prices={"base": (1.0, 1.0),
                                                                                "rer": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    toolkit = h.instrument(Toolkit(tools=[tool(search), *(await rag.list_tools())]))
    agent = make_agent(base, toolkit, [rag, *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is it?")
    return h.last_report(agent), reranker, final


async def test_shadow_mode_does_not_refuse_the_rerankers_call() -> None:
    report, reranker, final = await _drive("shadow")
    assert final.get_text_content() == "done"  # shadow: the user gets the model's answer
    skips = [d for d in report.decisions if d.action == "skip" and "middleware made itself" in d.detail]
    assert len(reranker.calls) == 1, f"the reranker was refused in shadow mode: {[d.detail for d in skips]}"
    assert not any(d.enforced for d in skips)

"""Red team, round 88 (on rounds 85-87). RAG static mode with persist_hint=True: the retrieved text (a provider key
in it) is redacted "before the model reads" it, at the harness's model call.
When the run ends before that call (a slow knowledge base past the deadline),
the persisted hint stays raw in the context, and the NEXT reply's model
request carries it (it is then in an earlier message, never read again)."""

import asyncio
import json
from typing import Any

from agentscope.message import TextBlock
from agentscope.middleware import RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from scripted import ALICE, ScriptedModel, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


class SlowHandbook:
    name = "handbook"
    description = "the handbook"

    def __init__(self) -> None:
        self.delay = 1.5

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        await asyncio.sleep(self.delay)
        return [VectorSearchResult(score=0.9, document_id="d0",
                                   chunk=Chunk(content=TextBlock(text=f"the deploy key is {SECRET}."),
                                               source="doc0.md", chunk_index=0, total_chunks=1))]


async def test_a_persisted_hint_is_never_sent_raw() -> None:
    kb = SlowHandbook()
    rag = RAGMiddleware([kb], RAGMiddleware.Parameters(mode="static", top_k=1, persist_hint=True))
    model = ScriptedModel([text("first"), text("second")])
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False, environ={})
    agent = make_agent(model, [], [rag, *h.middlewares()])
    with h.acting_for(ALICE):
        _, final1 = await run(agent, "what is the deploy key?")
        assert h.last_report(agent).reason == "deadline" and not model.calls  # the first reply made no call
        kb.delay = 0.0
        await run(agent, "and again?")
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    sent = json.dumps([c["formatted"] for c in model.calls])
    assert SECRET not in sent, "a model request carried the retrieved key raw"
    assert SECRET not in stored, "the stored context keeps the retrieved key raw"


"""Red team, round 89 (on round 88). RAG's static mode with a multimodal chunk (an image by URL, the URL carrying
a provider key as a signed link would): the hint RAG writes is a list
``[TextBlock, DataBlock(URLSource), TextBlock]``. ``_hint_redacted`` redacts
only its TextBlocks: the DataBlock's URL and name reach the model's request,
the stored context and the caller's stream raw. A tool result's data block
gets its URL and name redacted (``readable_data``)."""

import json
from typing import Any

from agentscope.event import HintBlockEvent
from agentscope.message import DataBlock, URLSource
from agentscope.middleware import RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from scripted import ALICE, ScriptedModel, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


class Figures:
    name = "figures"
    description = "figures"

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        img = DataBlock(source=URLSource(url=f"https://cdn.example.com/fig.png?key={SECRET}", media_type="image/png"),
                        name=f"fig-{SECRET}.png")
        return [VectorSearchResult(score=0.9, document_id="d0",
                                   chunk=Chunk(content=img, source="deck.pdf", chunk_index=0, total_chunks=1))]


async def test_a_hints_data_block_is_redacted_like_a_tool_results() -> None:
    rag = RAGMiddleware([Figures()], RAGMiddleware.Parameters(mode="static", top_k=1, emit_hint_event=True,
                                                              persist_hint=True))
    model = ScriptedModel([text("here is the figure")])
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(model, [], [rag, *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "show me the figure")
    hints = [e for e in events if isinstance(e, HintBlockEvent)]
    assert hints, "RAG streamed its hint"
    sent = json.dumps([c["formatted"] for c in model.calls])
    assert "cdn.example.com" in sent  # the figure was sent
    shown = json.dumps([e.model_dump(mode="json") for e in hints])
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    leaks = [where for where, blob in (("request", sent), ("stream", shown), ("context", stored)) if SECRET in blob]
    assert not leaks, f"the key in the hint's data block reached: {leaks}"

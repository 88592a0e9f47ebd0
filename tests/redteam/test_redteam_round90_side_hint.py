"""Red team, round 90 (on round 89). RAG's static mode writes what it retrieved (a provider key included) into
the reply's message as a hint. The harness redacts other middlewares' hints
before its own model call (``_redact_new_hints``) and before a compression,
but not before a side call: a middleware that classifies the context with a
model of its own (``generate_structured_output`` on ``agent.state.context``,
in its ``on_reasoning``, placed after RAG as the README orders: yours first)
sends the key to that model, while the agent's model gets it redacted."""

import json
from typing import Any

from agentscope.message import TextBlock
from agentscope.middleware import MiddlewareBase, RAGMiddleware
from agentscope.rag._document import Chunk
from agentscope.rag._vdb._vector_store import VectorSearchResult
from pydantic import BaseModel
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


class Handbook:
    name = "handbook"
    description = "the handbook"

    async def search(self, queries: list[str], top_k: int, score_threshold: float | None = None) -> list[Any]:
        return [VectorSearchResult(score=0.9, document_id="d0",
                                   chunk=Chunk(content=TextBlock(text=f"the deploy key is {SECRET}."),
                                               source="doc0.md", chunk_index=0, total_chunks=1))]


class Topic(BaseModel):
    topic: str


class TopicTagger(MiddlewareBase):
    """Tags each reasoning step with a topic, asking a small model of its own."""

    def __init__(self, model: Any) -> None:
        self.model = model

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        try:
            await self.model.generate_structured_output(list(agent.state.context), structured_model=Topic)
        except Exception:
            pass
        async for event in next_handler(**input_kwargs):
            yield event


async def test_a_side_calls_request_does_not_carry_a_foreign_hint_raw() -> None:
    tagger_model = ScriptedModel([calls(("generate_structured_output", {"topic": "ops"}), inp=10, out=5)],
                                 model="tagger", repeat=True)
    rag = RAGMiddleware([Handbook()], RAGMiddleware.Parameters(mode="static", top_k=1))
    base = ScriptedModel([text("done")], model="base")
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"base": (1.0, 1.0), "tagger": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(base, [], [rag, TopicTagger(tagger_model), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the deploy key?")
    assert tagger_model.calls, "the tagger was not called"
    assert SECRET not in json.dumps(base.calls[0].formatted)  # the agent's model: redacted
    assert SECRET not in json.dumps([c.formatted for c in tagger_model.calls]), "the tagger's model got the key raw"

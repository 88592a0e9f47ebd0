"""Red team, round 88 (on rounds 85-87). AgentScope's Mem0Middleware (static_control, as documented: "appends the
retrieved memories to ``agent.state.context`` as an AssistantMsg(name="memory")")
writes its hint into a message of its own (a fresh id, not the reply's):
``_redact_new_hints`` reads only ``context[-1]`` when its id is the reply's,
so a provider key a memory recalls reaches the model, and stays in the
stored context, raw. README's table row: "RAGMiddleware, memory, TTS | combine;
the hints they write (RAG's retrieved text) are redacted in the stream and
before the model reads them"."""

import json

from agentscope.middleware import Mem0Middleware
from scripted import ALICE, ScriptedModel, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


class FakeMem0:
    """A mem0 async client as the middleware reads one."""

    async def search(self, query, **kwargs):
        return {"results": [{"memory": f"the user's deploy key is {SECRET}"}]}

    async def add(self, messages, **kwargs):
        return {"results": [{"memory": "saved"}]}


async def test_a_memory_hint_is_redacted_before_the_model_reads_it() -> None:
    memory = Mem0Middleware(user_id="u-42", client=FakeMem0(), mode="static_control")
    model = ScriptedModel([text("noted")])
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(model, [], [memory, *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is my deploy key?")
    sent = json.dumps(model.calls[0]["formatted"])
    assert "deploy key is" in sent  # the memory was read
    assert SECRET not in sent, "the memory's key was sent to the model raw"
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    assert SECRET not in stored, "the stored context keeps the memory's key raw"

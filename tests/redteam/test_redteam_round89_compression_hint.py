"""Red team, round 89 (on round 88). Mem0Middleware (static_control, placed first as the README says) appends the
recalled memory as a hint message at the reply's start. AgentScope compresses
the context at the start of each round, BEFORE the round's model call; the
harness redacts other middlewares' hints only in ``on_model_call``
(``_redact_new_hints``). So the compression request (a model call the harness
counts as the run's) carries the recalled provider key raw to the provider."""

import json

from agentscope.middleware import Mem0Middleware
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
SUMMARY = {"task_overview": "t", "current_state": "c", "important_discoveries": "d", "next_steps": "n",
           "context_to_preserve": "p"}


class FakeMem0:
    async def search(self, query, **kwargs):
        notes = "deploy notes: " + "the pipeline runs nightly and pushes images to the registry. " * 120
        return {"results": [{"memory": f"{notes} The user's deploy key is {SECRET}."}]}

    async def add(self, messages, **kwargs):
        return {"results": [{"memory": "saved"}]}


async def test_a_compression_request_never_carries_a_raw_memory_hint() -> None:
    memory = Mem0Middleware(user_id="u-42", client=FakeMem0(), mode="static_control")
    model = ScriptedModel([calls(("generate_structured_output", SUMMARY)), text("noted")])
    model.context_size = 2000
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(model, [], [memory, *h.middlewares()])
    with h.acting_for(ALICE):
        _, final = await run(agent, "what do you remember about deploying?")
    report = h.last_report(agent)
    assert len(model.calls) == 2 and report.model_calls == 2, (len(model.calls), report.model_calls)
    compression_request = json.dumps(model.calls[0]["formatted"])
    assert "deploy notes" in compression_request  # the memory was compressed
    assert SECRET not in compression_request, "the compression request carried the memory's key raw"

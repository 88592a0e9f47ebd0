"""Round 118 (red team on rounds 116-117). Round 116 reads a model delta over 16 KB in pieces (``agent_adapter._pieces``: a
model that does not stream gives its whole answer as one delta), each piece made with
``event.model_copy(update={"delta": ...})``: every piece keeps the original event's
``id``. AgentScope's ``EventBase.id`` is the "Unique event identifier" (a fresh uuid per
event by default): a bare agent, or a streaming model's deltas, never repeat one. Through
the harness, a 40 KB answer reaches the user as three TextBlockDeltaEvents with ONE id:
a UI or an event store that keys events by id (SSE ``id:``/``Last-Event-ID`` replay,
de-duplication) keeps the first 16 KB of the answer and drops the rest as repeats.

README, Compatibility: "With a default HarnessConfig() and nothing triggering, an agent
behaves as without the harness ... the 12 differences ... streamed text re-chunked by the
redactor": re-chunked, not re-issued under one event id (the redactor's own rest delta,
``_delta_for``, gets a fresh id)."""
from __future__ import annotations

from collections import Counter

import pytest

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, make_agent, run, text

pytestmark = pytest.mark.asyncio

ANSWER = ("Your order history, line by line: one blue mug, shipped on time. " * 700)[:40_000]


@pytest.mark.parametrize("harnessed", [False, True])  # control first
async def test_every_streamed_event_has_its_own_id(harnessed: bool) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([text(ANSWER)])  # does not stream: the answer is one delta
    agent = make_agent(model, [], h.middlewares() if harnessed else None)
    with h.acting_for(ALICE):
        events, final = await run(agent, "show my order history")
    deltas = [e for e in events if type(e).__name__ == "TextBlockDeltaEvent"]
    assert "".join(d.delta for d in deltas) == ANSWER == final.get_text_content()
    repeated = {i: n for i, n in Counter(e.id for e in events).items() if n > 1}
    assert not repeated, (
        f"{len(deltas)} text deltas; event ids carried by more than one event: {repeated}")

"""Round 148 a: text a middleware before the harness's streams for a call (progress) and
then DELEGATES to the real tool is held by round 147's fix (`held_deltas`: the call id is
in `run.admitted`) and, the call not being served, shown at the end piece by piece as
each piece was redacted alone (lifecycle.on_item `_TOOL_END`: `return [*held, end]`).

README "Secrets": secrets "are redacted in tool results ..., streamed text ...; A stream
holds back only what could still become a secret"; README "Configuration", `pii`: "(a tool
result, streamed too, follows its tool's `ToolPolicy.pii`: what the model read)"; README
"Combining": text a middleware before the harness's streams "is held and shown at its end
as the model reads the result, in one piece".

Attack: a progress middleware (first) streams "using key sk-proj-A1b2C3" + "d4E5f6...
for maria.gonzalez@example.org" as two `ToolChunk`s, then delegates to the real `lookup`
(`pii={"email": "block"}`).
Seen: the user's stream carries the whole key (each piece alone matches no key shape) and
the customer's address, though the model was told the result was withheld. Control: the
tool itself streaming the same two pieces: the key is redacted across them.
Should: the held pieces are redacted and shaped as one text (they are all held until the
end anyway), or not shown: nothing the harness withholds from the model reaches the user.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import TextBlock, ToolResultState
from agentscope.tool import ToolChunk, Toolkit, ToolResponse

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.stream_kit import StreamsAround
from tests.scripted import ALICE, ScriptedModel, calls, last_tool_message, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
EMAIL = "maria.gonzalez@example.org"
PIECES = (f"using key {KEY[:14]}", f"{KEY[14:]} for {EMAIL}\n")
RECORD = f"customer: {EMAIL}"


def _chunks() -> list[ToolChunk]:
    return [ToolChunk(content=[TextBlock(text=p)], state=ToolResultState.RUNNING) for p in PIECES]


async def streaming_lookup(q: str) -> Any:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    for chunk in _chunks():
        yield chunk
    yield ToolResponse(content=[TextBlock(text=RECORD)], state=ToolResultState.SUCCESS)


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return RECORD


@pytest.mark.parametrize("by_middleware", [False, True], ids=["tool_streams", "middleware_streams_then_delegates"])
async def test_held_progress_text_is_redacted_and_shaped_whole(by_middleware: bool) -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("I could not read the record.")])
    fn = lookup if by_middleware else streaming_lookup
    fn.__name__ = "lookup"
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(fn)])),
                       [*([StreamsAround(before=[c.content for c in _chunks()])] if by_middleware else []), *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who is maria?")
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert EMAIL not in last_tool_message(model)  # the model read it withheld (pii_blocked)
    assert KEY[14:] not in streamed, f"the key reached the user's stream whole: {streamed!r}"
    assert EMAIL not in streamed, f"the address the model was told was withheld was streamed: {streamed!r}"

"""Round 149 a: a piece a middleware before the harness's streams for a call AFTER the
call's result (a `ToolChunk` after the `ToolResponse`: a summary, a timing line) comes
after the call's `ToolResultEndEvent`, when the lifecycle has forgotten the call's tool
(`tool_names` popped at `_TOOL_END`): it is not held, and passes piece by piece through
the per-delta redactor only (no `pii`, a key split over two pieces not redacted).

README "Combining with AgentScope's built-in middlewares": "Text any middleware before the
harness's streams for a call and then hands the call on (progress) is shown at the call's
end too, in one piece, redacted and shaped by the tool's `pii` (left out when that
withholds it)"; CHANGELOG round 148 a: "any other piece of a tool's result is held to the
call's end and shown in one piece, redacted and shaped by the tool's `pii`".

Attack: an audit middleware placed first hands the call on, passes its stream, and then
streams a closing line quoting the record it saw ("done: customer maria.gonzalez@...
key sk-proj-A1b2C3" + "d4E5...") in two `ToolChunk`s; `lookup` has `pii={"email": "block"}`.
Seen: both pieces reach the user: the address the model was told was withheld, and the
whole key (each piece alone matches no key shape).
Should: the pieces are held (or shaped whole) as any other piece of a tool's result.
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import TextBlock
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.stream_kit import StreamsAround
from tests.scripted import ALICE, ScriptedModel, calls, last_tool_message, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
EMAIL = "maria.gonzalez@example.org"
RECORD = f"customer: {EMAIL}"
PIECES = (f"done: {EMAIL}, key {KEY[:14]}", f"{KEY[14:]}\n")


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return RECORD


async def test_pieces_after_the_result_are_shaped_too() -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("I could not read the record.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), [StreamsAround(after=[[TextBlock(text=piece)] for piece in PIECES]), *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who is maria?")
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert EMAIL not in last_tool_message(model)  # the model read it withheld (pii_blocked)
    assert KEY[14:] not in streamed, f"the key reached the user's stream whole: {streamed!r}"
    assert EMAIL not in streamed, f"the address the model was told was withheld was streamed: {streamed!r}"

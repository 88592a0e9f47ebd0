"""Round 147 a: a cache before the harness's that replays a result as AgentScope's tools
do (a `ToolChunk` of its text, then the `ToolResponse`) has the chunk streamed to the
user as it served it: AgentScope turns it into `ToolResultTextDeltaEvent`s, and the
lifecycle's `_TOOL_TEXT` step redacts secrets only (`refusal_shown` rewrites personal
data only in AgentScope's own refusals). The tool's `pii` is never applied there: with
`pii={"email": "block"}` the model is told the result was withheld (`pii_blocked`) while
the user's stream shows the customer's address. A tool's own result streams the chunk
the harness's `on_acting` shaped.

README "Configuration", `pii`: "(a tool result, streamed too, follows its tool's
`ToolPolicy.pii`: what the model read)"; README "Combining": a served result "is shaped
as the tool's would be (redacted, its `pii` applied, fenced, withheld for what it says)
as it enters the context, and its end event says so (`error` when withheld)".

Attack: tests/redteam/served_kit.py's lookup (`pii={"email": "block"}`), served by a
cache that streams its chunk first.
Seen: the served case's streamed deltas carry `maria.gonzalez@example.org`; its end event
says `error` (withheld) and the model read no address. Control (the tool itself): no
address in the stream.
Should: the streamed text follows the tool's `pii` (withheld/blocked as the model read it).
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultEndEvent, ToolResultTextDeltaEvent
from agentscope.message import TextBlock, ToolResultState
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.served_kit import EMAIL, RECORD, lookup
from tests.redteam.stream_kit import ServesStreamed
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("cached", [False, True], ids=["tool_itself", "served_by_cache"])
async def test_a_served_results_streamed_text_follows_the_tools_pii(cached: bool) -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("I could not read the record.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])),
                       [*([ServesStreamed("lookup", lambda: [TextBlock(text=RECORD)])] if cached else []), *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who is maria?")
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    ends = [e.state for e in events if isinstance(e, ToolResultEndEvent)]
    assert EMAIL not in model.calls[-1].last_result  # the model read it withheld
    assert ends == [ToolResultState.ERROR], ends
    assert EMAIL not in streamed, f"the user's stream showed the address the model was told was withheld: {streamed!r}"

"""Round 150 a: the lifecycle tells AgentScope's refusal texts by their opening words only
(`quotes_the_call`: "Input validation failed for tool ", "ToolNotFoundError: ", ...), on
EACH piece: a piece of a middleware's progress text that opens with those words is not
held, but redacted alone and shown as it comes, so a secret split across it and the next
piece (held, shown at the call's end) is never redacted whole.

README "Combining with AgentScope's built-in middlewares": "Text any middleware before the
harness's streams for a call and then hands the call on (progress) is shown at the call's
end too, in one piece, redacted and shaped by the tool's `pii`"; README "Secrets": secrets
are redacted in "streamed text".

Attack: a routing middleware (first) reports the lookup it could not route locally before
handing the call on: "ToolNotFoundError: lookup not in local index, using key sk-proj-A1b2C3"
+ "d4E5f6... for the remote index\n" (two `ToolChunk`s), then delegates to `lookup`.
Seen: the first piece reaches the user at once, the second at the call's end: the whole
key is in the user's stream (each piece alone matches no key shape). Control (`plain`):
the same pieces without the opening words are held, joined and the key redacted.
Should: a piece is AgentScope's refusal only when AgentScope wrote it: its refusal is the
only piece of a call that has no admitted run (`_handle_error_tool_call`: start, one text,
end with state ERROR/DENIED), or check the joined held text rather than each piece.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import TextBlock, ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return "one record found"


class Router(MiddlewareBase):
    def __init__(self, opening: str) -> None:
        super().__init__()
        self.opening = opening

    async def get_middleware_key(self) -> str:
        return "router"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        for piece in (f"{self.opening}lookup not in local index, using key {KEY[:14]}",
                      f"{KEY[14:]} for the remote index\n"):
            yield ToolChunk(content=[TextBlock(text=piece)], state=ToolResultState.RUNNING)
        async for item in next_handler(**input_kwargs):
            yield item


@pytest.mark.parametrize("opening", ["", "ToolNotFoundError: "], ids=["plain", "refusal_words"])
async def test_progress_opening_like_a_refusal_is_still_held_whole(opening: str) -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval")}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("found one.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), [Router(opening), *h.middlewares()])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who is maria?")
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert "remote index" in streamed  # the progress text is shown
    assert KEY[14:] not in streamed, f"the key reached the user's stream whole: {streamed!r}"

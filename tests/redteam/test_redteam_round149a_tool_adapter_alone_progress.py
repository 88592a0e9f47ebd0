"""Round 149 a: with the tool adapter alone there is no reply lifecycle to hold a
middleware's pieces, so text a middleware before the harness's streams for a call (progress)
reaches the user as it was written: a key split over two pieces whole, an address the
tool's `pii` blocks (the model is told the result was withheld).

README "Combining with AgentScope's built-in middlewares" (round 148 a): "Text any
middleware before the harness's streams for a call and then hands the call on (progress) is
shown at the call's end too, in one piece, redacted and shaped by the tool's `pii` (left out
when that withholds it)". README "Choices where the design is silent": "Either adapter works
alone ... The tool adapter alone still gates every tool call"; its written *Limits* (client
results, confirmation rules, run concurrency, sub-agents) do not name this one.

Attack: `[Progress(), harness.middlewares()[1]]`; Progress streams "scanning <email> with
sk-proj-A1b2C3" + "d4E5..." then hands the call on to `lookup` (`pii={"email": "block"}`).
Seen: both pieces in the user's stream, raw.
Should: either the tool adapter shapes what it cannot hold (it cannot: the pieces never pass
it), or README names this among the tool adapter alone's limits.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import TextBlock, ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, last_tool_message, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
EMAIL = "maria.gonzalez@example.org"


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return f"customer {EMAIL}"


class Progress(MiddlewareBase):
    async def get_middleware_key(self) -> str:
        return "progress"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        yield ToolChunk(content=[TextBlock(text=f"scanning {EMAIL} with {KEY[:14]}")], state=ToolResultState.RUNNING)
        yield ToolChunk(content=[TextBlock(text=KEY[14:])], state=ToolResultState.RUNNING)
        async for item in next_handler(**input_kwargs):
            yield item


@pytest.mark.xfail(strict=True, reason="README limit: with the tool adapter alone no reply step holds a "
                                        "middleware's progress text")
async def test_progress_text_with_the_tool_adapter_alone_is_shaped() -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("I could not read the record.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), [Progress(), h.middlewares()[1]])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who is maria?")
    streamed = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert EMAIL not in last_tool_message(model)
    assert EMAIL not in streamed and KEY[14:] not in streamed, f"raw progress in the user's stream: {streamed!r}"

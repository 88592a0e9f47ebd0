"""A tool result's stream as a middleware placed before the harness's writes it:
pieces before it hands the call on (progress) and after (a closing line), and the
longest event-loop block of a reply, harnessed against bare."""

from __future__ import annotations

import gc
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from agentscope.message import ToolResultState
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolChunk, Toolkit, ToolResponse

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.perf.loopkit import longest_block
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool


class StreamsAround(MiddlewareBase):
    """A user's middleware, placed first: streams ``before`` (each a chunk's
    content), hands the call on, then streams ``after``."""

    def __init__(self, before: Sequence[list[Any]] = (), after: Sequence[list[Any]] = ()) -> None:
        self.before, self.after = before, after

    async def get_middleware_key(self) -> str:
        return "streams_around"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        for content in self.before:
            yield ToolChunk(content=content, state=ToolResultState.RUNNING)
        async for item in next_handler(**input_kwargs):
            yield item
        for content in self.after:
            yield ToolChunk(content=content, state=ToolResultState.RUNNING)


async def streamed(content: Callable[[], list[Any]]) -> AsyncGenerator[Any, None]:
    """A result as a tool streams it: a chunk of ``content``, then the response."""
    yield ToolChunk(content=content(), state=ToolResultState.RUNNING)
    yield ToolResponse(content=content(), state=ToolResultState.SUCCESS)


class ServesStreamed(MiddlewareBase):
    """A user's result cache, placed first: serves ``tool``'s calls as a tool
    streams a result (``streamed``), the tool never run; hands any other on."""

    def __init__(self, tool: str, content: Callable[[], list[Any]]) -> None:
        self.tool, self.content = tool, content

    async def get_middleware_key(self) -> str:
        return "serves_streamed"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        stream = streamed(self.content) if input_kwargs["tool_call"].name == self.tool else next_handler(**input_kwargs)
        async for item in stream:
            yield item


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return "one record found"


async def loop_gap(middleware: MiddlewareBase, harnessed: bool, policy: ToolPolicy) -> tuple[float, list[Any]]:
    """One reply calling ``lookup`` with ``middleware`` first:
    the longest event-loop block and the streamed events."""
    gc.collect()
    h = Harness(HarnessConfig(tools={"lookup": policy}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "maria"})), text("found one.")], model="m")
    toolkit = h.instrument(Toolkit(tools=[tool(lookup)])) if harnessed else Toolkit(tools=[tool(lookup)])
    agent = make_agent(model, toolkit, [middleware, *(h.middlewares() if harnessed else [])])
    out: list[Any] = []

    async def work() -> None:
        out.extend((await run(agent, "who is maria?"))[0])

    with h.acting_for(ALICE):
        gap = await longest_block(work())
    return gap, out

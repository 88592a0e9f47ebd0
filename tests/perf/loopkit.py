"""The loop-gap kit: what the event-loop tests of tests/perf share.

Each of them plays one scripted reply on a harnessed agent and on a bare
AgentScope agent (same model script, same tools, same prompt) while a ticker
task measures the longest stretch the event loop went without a turn; the
test then bounds the harness's gap, most often against the bare agent's.
Written once here so that every test states only its input and its bound.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from agentscope.agent import Agent
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from benchmarks._common import heap_frozen
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

Step = Callable[[Agent], Awaitable[Awaitable[Any]]]
"""Readies a reply on the agent (unmeasured) and returns the step to measure."""

FETCH_PAGE = [calls(("fetch_page", {"url": "https://example.com"})), text("done")]
"""The page tests' script: the model fetches one page, then answers "done"."""


def page_tool(page: str) -> Callable[[str], Awaitable[str]]:
    """A ``fetch_page(url)`` tool that answers ``page``."""

    async def fetch_page(url: str) -> str:
        """Fetch a web page.

        Args:
            url (str): The page.
        """
        return page

    return fetch_page


class Side(NamedTuple):
    """One measured run: the gauge's reading, the model (its calls), the result."""

    gap: float
    model: ScriptedModel
    result: Any


class Gaps(NamedTuple):
    """Both runs of one script: harnessed gap, bare gap, (harnessed, bare) models and results."""

    gap: float
    bare: float
    models: tuple[ScriptedModel, ScriptedModel]
    results: tuple[Any, Any]


async def longest_block(work: Awaitable[Any]) -> float:
    """Run ``work`` beside a 1 ms ticker; the longest time (s) the loop went without a turn."""
    with heap_frozen():
        task = asyncio.ensure_future(work)
        longest, last = 0.0, time.perf_counter()
        while not task.done():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
        await task
    return longest


async def elapsed(work: Awaitable[Any]) -> float:
    """Await ``work``; the wall time (s) it took."""
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


def agent_for(model: ScriptedModel, tools: list[Any], harness: Harness | None = None,
              instrument: bool = True) -> Agent:
    """A bare agent (no ``harness``), or one with the harness's middlewares and,
    with ``instrument``, its tools in the harness's instrumented toolkit."""
    if harness is None:
        return make_agent(model, tools)
    toolkit = harness.instrument(Toolkit(tools=[tool(t) for t in tools])) if instrument else tools
    return make_agent(model, toolkit, harness.middlewares())


async def measure(script: Sequence[Any], tools: list[Any], prompt: str | Step, config: HarnessConfig | None = None,
                  *, harnessed: bool, instrument: bool = True, hooks: Sequence[Any] = (),
                  gauge: Callable[[Awaitable[Any]], Awaitable[float]] = longest_block, **model_kw: Any) -> Side:
    """Play a copy of ``script`` (``ScriptedModel(..., **model_kw)``) on one agent,
    acting for ALICE, and ``gauge`` the reply to ``prompt`` (its result: the final
    answer's text), or the step a ``Step`` returns (its result: what it returned);
    harnessed with the user ``hooks`` given."""
    gc.collect()  # what earlier tests left is no collection of this reply's
    model = ScriptedModel(copy.deepcopy(list(script)), **model_kw)
    harness = Harness(config or HarnessConfig(), hooks=list(hooks), load_entry_points=False, environ={})
    agent = agent_for(model, tools, harness if harnessed else None, instrument)
    out: list[Any] = []

    async def work(step: Awaitable[Any]) -> None:
        out.append(await step)

    async def reply(words: str) -> str:
        _, final = await run(agent, words)
        return final.get_text_content() or ""

    with harness.acting_for(ALICE):
        step = reply(prompt) if isinstance(prompt, str) else await prompt(agent)
        gap = await gauge(work(step))
    return Side(gap, model, out[0])


async def loop_gaps(script: Sequence[Any], tools: list[Any], prompt: str | Step, config: HarnessConfig | None = None,
                    *, instrument: bool = True, hooks: Sequence[Any] = (), **model_kw: Any) -> Gaps:
    """``measure`` the longest loop block of the same script bare, then harnessed."""
    bare = await measure(script, tools, prompt, config, harnessed=False, instrument=instrument, **model_kw)
    harnessed = await measure(script, tools, prompt, config, harnessed=True, instrument=instrument, hooks=hooks,
                              **model_kw)
    return Gaps(harnessed.gap, bare.gap, (harnessed.model, bare.model), (harnessed.result, bare.result))

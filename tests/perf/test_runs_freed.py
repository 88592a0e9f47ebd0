"""Runs are freed when they settle (issue 16 item 4): once a reply ended,
however it ended (settled, abandoned by its consumer, cancelled), and the
loop turned once, nothing (no timer, task or context copy) keeps the run's
state alive. Async hooks (awaited under ``hook_timeout_s``) and the daily
spend store (its calls bounded by a timeout) both arm timers while the run's
context variables are set."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from typing import Any

import pytest
from agentscope.message import UserMsg
from scripted import ScriptedModel, calls, make_agent, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, HookContext, Principal, harness_hook
from agentscope_harness.run_state import current_run

USER = Principal(user_id="u-1", tenant="acme")


@harness_hook("pre_think", name="async_probe")
async def async_probe(ctx: HookContext) -> None:
    await asyncio.sleep(0)


@harness_hook("post_tool_call", name="async_result_probe")
async def async_result_probe(ctx: HookContext) -> None:
    await asyncio.sleep(0)


class Seen:
    """Weak references to the runs the tools ran in, and their artifacts."""

    def __init__(self) -> None:
        self.runs: list[weakref.ref] = []
        self.started = asyncio.Event()

    def tools(self) -> list[Any]:
        seen = self

        async def fetch(page: int) -> str:
            """Fetch a page.

            Args:
                page (int): The page.
            """
            run = current_run()
            assert run is not None
            seen.runs.append(weakref.ref(run))
            seen.started.set()
            if page < 0:
                await asyncio.sleep(3600)
            return "p" * 50_000  # truncated: the full text goes to the run's artifacts

        return [fetch]


DEADLINE_S: float | None = None


@pytest.fixture(autouse=True, params=[None, 600.0], ids=["no_deadline", "deadline"])
def deadline(request: Any) -> Any:
    """Each test with and without a deadline: a reply under one arms the reply
    layer's cut timer (``lifecycle.OutsideCut``), due long after the test."""
    global DEADLINE_S
    DEADLINE_S = request.param
    yield
    DEADLINE_S = None


def harness() -> Harness:
    config = HarnessConfig(
        cost=CostPolicy(daily_quota_usd=100.0, prices={"scripted": (1.0, 1.0)}),
        hook_timeout_s=600, result_max_tokens=100, deadline_s=DEADLINE_S,
    )
    return Harness(config, hooks=[async_probe, async_result_probe], load_entry_points=False)


@pytest.fixture(autouse=True)
async def busy_loop():
    """A loop with a live timer due before the hook timeouts (a server's
    keep-alive): asyncio then keeps cancelled timers queued until they are
    due, with the context they were armed in."""
    handle = asyncio.get_running_loop().call_later(300, lambda: None)
    yield
    handle.cancel()


async def settle_loop() -> None:
    await asyncio.sleep(0)
    gc.collect()


async def drained(h: Harness) -> None:
    """Turns of the loop until the reply's generators were finalized (one
    task per nested async generator, scheduled by asyncio)."""
    for _ in range(50):
        if not len(h.table):
            return
        await asyncio.sleep(0)
        gc.collect()
    raise AssertionError("the abandoned reply never released its slot")


def alive(seen: Seen) -> list[Any]:
    return [r() for r in seen.runs if r() is not None]


async def test_a_settled_run_is_freed():
    h, seen = harness(), Seen()
    model = ScriptedModel([calls(("fetch", {"page": 1})), calls(("fetch", {"page": 2})), text("done")])
    agent = make_agent(model, seen.tools(), middlewares=h.middlewares())
    with h.acting_for(USER):
        await agent.reply(UserMsg("user", "hi"))
    assert h.last_report(agent).terminal_state.value == "completed"
    assert len(seen.runs) == 2 and len(h.table) == 0
    await settle_loop()
    assert alive(seen) == [], gc.get_referrers(*alive(seen))


async def test_an_abandoned_stream_frees_its_run():
    h, seen = harness(), Seen()
    model = ScriptedModel([calls(("fetch", {"page": i})) for i in range(5)] + [text("done")])
    agent = make_agent(model, seen.tools(), middlewares=h.middlewares())
    with h.acting_for(USER):
        stream = agent.reply_stream(UserMsg("user", "hi"))
        async for event in stream:
            if seen.runs and type(event).__name__ == "ToolResultEndEvent":
                break
    assert seen.runs
    del stream, event
    await drained(h)
    await settle_loop()
    assert alive(seen) == [], gc.get_referrers(*alive(seen))


async def test_a_cancelled_reply_frees_its_run():
    h, seen = harness(), Seen()
    model = ScriptedModel([calls(("fetch", {"page": 1})), calls(("fetch", {"page": -1})), text("done")])
    agent = make_agent(model, seen.tools(), middlewares=h.middlewares())

    async def reply() -> None:
        with h.acting_for(USER):
            await agent.reply(UserMsg("user", "hi"))

    task = asyncio.create_task(reply())
    while len(seen.runs) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):  # AgentScope may end the reply as interrupted
        await task
    del task
    await settle_loop()
    assert len(h.table) == 0
    assert alive(seen) == [], gc.get_referrers(*alive(seen))

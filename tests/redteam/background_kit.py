"""Red-team helpers: a lead's tool that starts a sub-agent in a background
task (the sub-agent may outlive the lead's reply), and such a sub-agent
parked on its client once its lead has settled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import Toolkit
from scripted import (
    RAN,
    ScriptedModel,
    calls,
    client_tool,
    drain,
    make_agent,
    run,
    search,
    slow,
    slow_started,
    text,
    tool,
)

from agentscope_harness import TerminalState


def spawner(child: Any, background: list[asyncio.Task[Any]], asked: list[Any] | None = None,
            ) -> Callable[[str], Awaitable[str]]:
    """The lead's ``spawn`` tool: starts ``child``'s reply in a task kept in
    ``background``; with ``asked``, the questions for a client it streams."""

    async def start(task: str) -> None:
        for event in await drain(child, UserMsg("lead", task)):
            if asked is not None and isinstance(event, RequireExternalExecutionEvent):
                asked.append(event)

    async def spawn(task: str) -> str:
        """Start the sub-agent in the background.

        Args:
            task (str): What it should do.
        """
        background.append(asyncio.create_task(start(task)))
        return "started"

    return spawn


async def migrator_parked_in_background(h: Any, slow_s: float) -> tuple[Any, ExternalExecutionResultEvent]:
    """A lead (run for the caller bound now) starts a migrator in the
    background and settles; the migrator parks on its client's code check,
    then would run ``slow`` for ``slow_s``. The migrator, and the client's
    answer that resumes it."""
    child = make_agent(
        ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("slow", {"seconds": slow_s})),
                       text("migrated")]),
        h.instrument(Toolkit(tools=[client_tool(), tool(slow)])), h.middlewares(), name="migrator",
    )
    asked: list[Any] = []
    background: list[asyncio.Task[Any]] = []
    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]),
                      [spawner(child, background, asked)], h.middlewares(), name="lead")
    await run(lead, "migrate my data")
    await asyncio.gather(*background)
    assert h.last_report(child).terminal_state is TerminalState.WAITING_INPUT
    call = asked[0].tool_calls[0]
    done = [ToolResultBlock(id=call.id, name=call.name, output="code ok", state="success")]
    return child, ExternalExecutionResultEvent(reply_id=child.state.reply_id, execution_results=done)


async def while_resumed(child: Any, answer: Any, during: Callable[[], Awaitable[None]]) -> None:
    """Resume ``child`` with ``answer`` in a task; once its ``slow`` tool has
    started, ``during()``; then the resumed reply's end."""
    resumed = asyncio.create_task(drain(child, answer))
    try:
        await slow_started()
        await during()
    finally:
        await resumed


async def assert_second_run_refused(h: Any, why: str) -> None:
    """The bound caller's other run, made while ``slow`` runs in a
    background sub-agent (one run of the caller in flight): refused, its
    search never run."""
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    await run(other, "find my invoices")
    assert "slow:end" not in RAN  # the sub-agent was still running
    report = h.last_report(other)
    assert report.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, (
        f"{why}: {report.terminal_state.value}, {RAN}"
    )

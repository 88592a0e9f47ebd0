"""Red-team helpers: a lead's tool that starts a sub-agent in a background
task (the sub-agent may outlive the lead's reply)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from scripted import drain


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

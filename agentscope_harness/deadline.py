"""The run deadline, for tool authors: ``clamp_timeout`` and ``remaining_time``.

The agent adapter records ``deadline = monotonic() + deadline_s`` in a
ContextVar when a run starts. Tools and sub-agents inherit it (asyncio tasks
copy ContextVars), and a nested run keeps the tighter of its own and its
parent's deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

MIN_TIMEOUT_S = 0.05
"""Never clamp below this: 0 means "wait forever" to httpx and friends."""

_DEADLINE: ContextVar[float | None] = ContextVar("harness_deadline", default=None)


def current_deadline() -> float | None:
    """The monotonic deadline of the current run, or ``None``."""
    return _DEADLINE.get()


def remaining_time() -> float | None:
    """Seconds left before the current run's deadline (``None``: no deadline).

    May be negative once the deadline has passed.
    """
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def clamp_timeout(own_timeout: float | None) -> float | None:
    """``min(own_timeout, remaining)``: never more than ``own_timeout``, never
    less than 0.05 s. ``None`` stays ``None`` when there is no deadline."""
    left = remaining_time()
    if left is None:
        return own_timeout
    left = max(left, MIN_TIMEOUT_S)
    if own_timeout is None:
        return left
    return max(min(own_timeout, left), MIN_TIMEOUT_S) if own_timeout > 0 else left


def tighter(deadline: float | None, other: float | None) -> float | None:
    """The earlier of two optional deadlines."""
    if deadline is None:
        return other
    if other is None:
        return deadline
    return min(deadline, other)


async def bounded(awaitable: Awaitable[T], timeout_s: float | None, deadline: float | None) -> T:
    """``awaitable`` bounded by ``timeout_s`` and by ``deadline`` (monotonic),
    whichever comes first: a store or a hook that never answers must not
    hold a run past its deadline. Raises ``TimeoutError`` when it runs out."""
    limit = timeout_s
    if deadline is not None:
        left = max(deadline - time.monotonic(), MIN_TIMEOUT_S)
        limit = left if limit is None else min(limit, left)
    if limit is None:
        return await awaitable
    return await asyncio.wait_for(awaitable, limit)

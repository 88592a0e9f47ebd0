"""The run deadline, for tool authors: ``clamp_timeout`` and ``remaining_time``.

The agent adapter records ``deadline = monotonic() + deadline_s`` in a
ContextVar when a run starts. Tools and sub-agents inherit it (asyncio tasks
copy ContextVars), and a nested run keeps the tighter of its own and its
parent's deadline.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

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


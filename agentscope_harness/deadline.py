"""The run deadline, for tool authors: ``clamp_timeout`` and ``remaining_time``.

A run's deadline (``monotonic() + deadline_s``, the tighter of its own and
its parent's) lives on the run: tools and sub-agents read it through the
run handle they inherit (asyncio tasks copy ContextVars), so a resumed run's
fresh deadline is what they see, and a task that outlives the run keeps the
run's last one (the handle's). Outside any run, ``_DEADLINE`` bounds the
work (and a run opened there).
"""

from __future__ import annotations

import time
from contextvars import ContextVar

from .run_state import RUN_HANDLE, set_aside_deadline

MIN_TIMEOUT_S = 0.05
"""Never clamp below this: 0 means "wait forever" to httpx and friends."""

_DEADLINE: ContextVar[float | None] = ContextVar("harness_deadline", default=None)


def current_deadline() -> float | None:
    """The monotonic deadline of the current run, or ``None``."""
    handle = RUN_HANDLE.get()
    if handle is None:
        deadline = _DEADLINE.get()
    else:
        run = handle()
        deadline = run.deadline if run is not None else handle.deadline  # a task that outlived its run
    # a block bound to another caller inside a live run's tool (and a run's own work
    # bound again inside it) ends with that tool, which that run's deadline cuts
    return tighter(deadline, set_aside_deadline())


def remaining_time() -> float | None:
    """Seconds left before the current run's deadline (``None``: no deadline).

    May be negative once the deadline has passed.
    """
    deadline = current_deadline()
    return None if deadline is None else deadline - time.monotonic()


def seconds_told(left: float) -> str:
    """Time left as the model is told it: whole seconds, tenths under ten
    (``0.4s``: "0s" would tell a model with time left it has none)."""
    left = max(left, 0.0)
    return f"{left:.1f}s" if left < 10 else f"{left:.0f}s"


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


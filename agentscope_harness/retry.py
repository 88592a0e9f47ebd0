"""``retry_call``: retry a flaky dependency with backoff, never past the run
deadline, and give up with ``DependencyDown`` (which the model reads as "do
not retry; tell the user")."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
)

from .deadline import remaining_time
from .errors import DependencyDown, ErrorClass, classify_exception

T = TypeVar("T")

TRANSIENT: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    asyncio.TimeoutError,
)
"""The builtin transient errors. By default ``retry_call`` also retries
whatever the harness classifies as a dependency down or a timeout (httpx's,
aiohttp's and requests' connection errors and timeouts: none of them is a
builtin ``ConnectionError``)."""


async def retry_call(
    fn: Callable[..., Awaitable[T] | T],
    *args: Any,
    dependency: str | None = None,
    attempts: int = 3,
    retry_on: tuple[type[BaseException], ...] | None = None,
    initial_backoff_s: float = 0.2,
    max_backoff_s: float = 5.0,
    **kwargs: Any,
) -> T:
    """Call ``fn(*args, **kwargs)``, retrying ``retry_on`` errors (by
    default the transient ones: ``TRANSIENT`` and any error the harness
    classifies as a dependency down or a timeout) up to ``attempts`` times
    with jittered exponential backoff. Stops early when the run's deadline
    would pass; raises ``DependencyDown`` on giving up."""
    name = str(dependency or getattr(fn, "__name__", "dependency"))
    stop: Any = stop_after_attempt(attempts)
    left = remaining_time()
    if left is not None:
        stop = stop | stop_after_delay(max(left, 0.0))
    try:
        async for attempt in AsyncRetrying(
            stop=stop,
            wait=_backoff(initial_backoff_s, max_backoff_s),
            retry=retry_if_exception_type(retry_on) if retry_on is not None else retry_if_exception(_transient),
            reraise=False,
            before_sleep=_not_past_deadline,
        ):
            with attempt:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
                return result
    except RetryError as exc:
        raise DependencyDown(name, exc.last_attempt.exception()) from exc
    except _DeadlineReached as exc:
        raise DependencyDown(name, exc.__cause__ or "run deadline reached") from exc
    raise DependencyDown(name)  # pragma: no cover - tenacity always returns or raises


def _transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth another try by default."""
    return isinstance(exc, TRANSIENT) or classify_exception(exc) in (
        ErrorClass.DEPENDENCY_DOWN, ErrorClass.TIMEOUT_UNKNOWN)


def _backoff(initial_s: float, most_s: float) -> Callable[[Any], float]:
    """Exponential backoff from ``initial_s``, with jitter scaled to it
    (tenacity's adds up to 1 s), never over ``most_s``. Ours: tenacity's
    ``wait_exponential_jitter`` warns of a deprecated argument in one
    version and lacks its replacement in another, and a test suite that
    makes warnings errors would get the warning instead of ``DependencyDown``."""
    def wait(state: Any) -> float:
        return min(initial_s * 2 ** (state.attempt_number - 1) + random.uniform(0, initial_s), most_s)
    return wait


class _DeadlineReached(Exception):
    pass


def _not_past_deadline(state: Any) -> None:
    """Give up instead of sleeping past the run deadline."""
    left = remaining_time()
    sleep = getattr(state.next_action, "sleep", 0) or 0
    if left is not None and sleep >= left:
        raise _DeadlineReached() from state.outcome.exception()

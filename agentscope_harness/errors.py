"""Error classes: what kind of failure a tool result is, so the model and the
harness react differently to "the dependency is down" (do not retry),
"your arguments are wrong" (fix and retry) and "refused by policy"."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Any

import pydantic

METADATA_KEY = "harness"
"""Key under ``ToolResponse.metadata`` where the harness reads and writes its
facts (``error_class``, ``candidates``, ``picks``, ``facts``, ``code``...)."""



def being_cancelled() -> bool:
    """Whether this task is being cancelled: a ``CancelledError`` a hook or a
    store raises otherwise is its own failure, not its caller's cancellation."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0

class ErrorClass(str, Enum):
    """Machine-readable classes of a failed tool call (DESIGN 6.2)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    DEPENDENCY_DOWN = "dependency_down"
    TIMEOUT_UNKNOWN = "timeout_unknown"
    PERMISSION_DENIED = "permission_denied"
    QUOTA_EXHAUSTED = "quota_exhausted"
    POLICY_REFUSED = "policy_refused"
    CONFLICT = "conflict"
    TOOL_ERROR = "tool_error"


# The only failures that say something about the health of a tool's
# dependency, and so the only ones the shared breaker counts: one caller's
# arguments (or a tool's own bug) must not deny the tool to everyone.
BREAKER_FAILURES = frozenset({ErrorClass.DEPENDENCY_DOWN, ErrorClass.TIMEOUT_UNKNOWN})


class HarnessError(Exception):
    """Base class of the harness's own errors."""


class HarnessConfigError(HarnessError, ValueError):
    """Invalid configuration, raised at construction with the field named."""


class DependencyDown(HarnessError):
    """Raised by a tool (or by ``retry_call``) when a dependency is unavailable.

    Its class is kept by ``harness.instrument(toolkit)`` /
    ``harness.tool_middleware()``; the harness never classifies from text.
    """

    error_class = ErrorClass.DEPENDENCY_DOWN

    def __init__(self, dependency: str, cause: BaseException | str | None = None):
        self.dependency = dependency
        self.cause = cause
        text = f"{dependency} is unavailable."
        if cause is not None:  # told like a tool's own exception (``error_text``)
            text += f" ({cause if isinstance(cause, str) else error_text(cause)})"
        super().__init__(text)


class InvalidArguments(HarnessError, ValueError):
    """Raised by a tool whose arguments are wrong: the model should fix them.

    Never counts towards the circuit breaker.
    """

    error_class = ErrorClass.INVALID_ARGUMENTS


class Conflict(HarnessError):
    """Raised by a tool when the world changed under the call (e.g. an order
    already shipped): retrying the same call will not help."""

    error_class = ErrorClass.CONFLICT


def error_text(exc: BaseException) -> str:
    """What the model is told of a tool's exception: its message; for a
    pydantic validation error, its problems without their input values
    (pydantic shortens a long value in the middle, and a secret in it would
    survive as a fragment redaction cannot recognise)."""
    if isinstance(exc, pydantic.ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        return f"{exc.error_count()} validation error(s) for {exc.title}: {problems}"
    return str(exc) or type(exc).__name__


_DEPENDENCY_DOWN_NAMES = frozenset({
    "NetworkError", "RemoteProtocolError",  # httpx: the peer could not be reached, or went away
    "ClientConnectionError",  # aiohttp: refused, reset, disconnected (an OSError, no ConnectionError)
    "ConnectionError", "NewConnectionError",  # requests, urllib3: their own, no builtin ConnectionError
})
"""The connection errors of the common HTTP clients, by class name (the
harness imports none of them). Read before the timeouts: a connection that
timed out (requests' ``ConnectTimeout``, urllib3's ``NewConnectionError``)
sent nothing."""

_TIMEOUT_NAMES = frozenset({
    "TimeoutException",  # httpx: a connect, read, write or pool timeout
    "Timeout",  # requests: ReadTimeout
    "TimeoutError",  # urllib3's own (no builtin TimeoutError)
})


def classify_exception(exc: BaseException) -> ErrorClass:
    """Map an exception raised by a tool to its error class."""
    own = getattr(exc, "error_class", None)
    if isinstance(own, ErrorClass):
        return own
    if isinstance(own, str):
        try:
            return ErrorClass(own)
        except ValueError:
            pass
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return ErrorClass.TIMEOUT_UNKNOWN
    if isinstance(exc, PermissionError):
        return ErrorClass.PERMISSION_DENIED
    if isinstance(exc, ConnectionError):
        return ErrorClass.DEPENDENCY_DOWN
    if isinstance(exc, BaseExceptionGroup):  # noqa: F821 (3.11+; ruff targets 3.10) a task group's
        found = {classify_exception(e) for e in exc.exceptions}
        return next((c for c in _GROUP_ORDER if c in found), ErrorClass.TOOL_ERROR)
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _DEPENDENCY_DOWN_NAMES:
        return ErrorClass.DEPENDENCY_DOWN
    if names & _TIMEOUT_NAMES:
        return ErrorClass.TIMEOUT_UNKNOWN
    if type(exc).__name__ == "ValidationError":  # pydantic / jsonschema
        return ErrorClass.INVALID_ARGUMENTS
    if type(exc).__name__ == "MCPError":
        return _mcp_client_error(getattr(exc, "code", None), str(exc))
    return ErrorClass.TOOL_ERROR


_GROUP_ORDER = (ErrorClass.DEPENDENCY_DOWN, ErrorClass.TIMEOUT_UNKNOWN, ErrorClass.PERMISSION_DENIED,
                ErrorClass.INVALID_ARGUMENTS, ErrorClass.TOOL_ERROR)
"""An exception group's class: the gravest of its exceptions'."""


def _mcp_client_error(code: Any, message: str) -> ErrorClass:
    """An MCP call's error: the MCP SDK's ``REQUEST_TIMEOUT`` (-32001, in any
    words: its dispatchers word it differently) a timeout; its
    ``CONNECTION_CLOSED`` (-32000, "Connection closed") a dependency down. A
    server's own error with -32000 (JSON-RPC leaves -32000 to -32099 to
    servers) is the tool's. *Limit*: the SDK raises a server's error as it
    raises its own, so a server answering in those codes and words is taken
    at its word (for its own tools)."""
    if code == -32001:
        return ErrorClass.TIMEOUT_UNKNOWN
    if code == -32000 and message == "Connection closed":
        return ErrorClass.DEPENDENCY_DOWN
    return ErrorClass.TOOL_ERROR


def error_class_of(metadata: dict[str, Any] | None) -> ErrorClass:
    """The error class of a failed result, from the metadata the harness's
    tool middleware (or the tool itself) set. Never from the result's text:
    a tool's output is data, and text starting ``[harness:dependency_down]``
    would otherwise block the tool and feed the shared breaker."""
    own = ((metadata or {}).get(METADATA_KEY) or {}).get("error_class")
    if own:
        try:
            return ErrorClass(own)
        except ValueError:
            pass
    return ErrorClass.TOOL_ERROR

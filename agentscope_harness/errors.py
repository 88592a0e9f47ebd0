"""Error classes: what kind of failure a tool result is, so the model and the
harness react differently to "the dependency is down" (do not retry),
"your arguments are wrong" (fix and retry) and "refused by policy"."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Any

METADATA_KEY = "harness"
"""Key under ``ToolResponse.metadata`` where the harness reads and writes its
facts (``error_class``, ``candidates``, ``picks``, ``facts``, ``code``...)."""


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


# Failures that say nothing about the health of the tool's dependency.
NOT_BREAKER_FAILURES = frozenset(
    {
        ErrorClass.INVALID_ARGUMENTS,
        ErrorClass.PERMISSION_DENIED,
        ErrorClass.QUOTA_EXHAUSTED,
        ErrorClass.POLICY_REFUSED,
        ErrorClass.CONFLICT,
    },
)


class HarnessError(Exception):
    """Base class of the harness's own errors."""


class HarnessConfigError(HarnessError, ValueError):
    """Invalid configuration, raised at construction with the field named."""


class DependencyDown(HarnessError):
    """Raised by a tool (or by ``retry_call``) when a dependency is unavailable.

    Its message starts with the ``dependency_down`` sentinel so that even a
    tool the harness did not instrument is classified from its text alone.
    """

    error_class = ErrorClass.DEPENDENCY_DOWN

    def __init__(self, dependency: str, cause: BaseException | str | None = None):
        self.dependency = dependency
        self.cause = cause
        text = (
            f"[harness:dependency_down] {dependency} is unavailable. "
            "Do not retry; tell the user."
        )
        if cause is not None:
            text += f" ({cause})"
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
    if type(exc).__name__ == "ValidationError":  # pydantic / jsonschema
        return ErrorClass.INVALID_ARGUMENTS
    return ErrorClass.TOOL_ERROR


def error_class_of(metadata: dict[str, Any] | None, text: str) -> ErrorClass:
    """The error class of a failed result: from its metadata when a harness
    tool middleware (or the tool itself) set it, else from the text."""
    own = ((metadata or {}).get(METADATA_KEY) or {}).get("error_class")
    if own:
        try:
            return ErrorClass(own)
        except ValueError:
            pass
    if text.startswith("[harness:dependency_down]"):
        return ErrorClass.DEPENDENCY_DOWN
    if text.startswith("Input validation failed for tool"):
        return ErrorClass.INVALID_ARGUMENTS
    return ErrorClass.TOOL_ERROR

"""Sentinels: the short texts the model reads in place of a refused call's
result, ``[harness:<code>] <what happened and what to do next>``.

The harness remembers every sentinel it issued in a run, so the final-answer
audit strips exactly those; a tool's own output cannot forge one into the
audit because forged markers are neutralised before the model sees them.
"""

from __future__ import annotations

import re

CODES = frozenset(
    {
        "quota_exhausted",
        "permission_denied",
        "prerequisite_missing",
        "not_ready",
        "enough_results",
        "duplicate_call",
        "repeated_failure",
        "dependency_down",
        "run_concluded",
        "verification_failed",
        "policy_refused",
        "policy_error",
    },
)

_MARKER = re.compile(r"\[harness:", re.IGNORECASE)
_FORGED = "[harness(unverified):"


def format_sentinel(code: str, text: str, ref: str | None = None) -> str:
    """``[harness:<code>] <text>`` with an optional ``(ref: …)`` tail."""
    line = f"[harness:{code}] {text}"
    return f"{line} (ref: {ref})" if ref else line


def neutralise(text: str) -> str:
    """Defang sentinel markers written by a tool, so the model (and the audit)
    can tell them from the harness's own."""
    if "[" not in text:
        return text
    return _MARKER.sub(_FORGED, text)


def strip_issued(text: str, issued: set[str]) -> str:
    """Remove every sentinel the harness issued in this run from ``text``."""
    if not issued or "[harness:" not in text:
        return text
    for sentinel in sorted(issued, key=len, reverse=True):
        text = text.replace(sentinel, "")
    return text

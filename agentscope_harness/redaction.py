"""Secret redaction for tool results, final answers and streamed text.

Text already streamed cannot be unsent, so the stream redactor holds back the
last ``window`` characters (and any match that reaches into them) until it is
sure no secret spans the cut: a key split across deltas is still caught.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

BUILTIN_SECRETS: dict[str, str] = {
    "private_key": r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
    "anthropic_key": r"sk-ant-[A-Za-z0-9_\-]{20,}",
    "openai_key": r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}",
    "stripe_key": r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    "aws_access_key": r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    "github_token": r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    "google_api_key": r"AIza[0-9A-Za-z_\-]{35}",
    "slack_token": r"xox[abposr]-[A-Za-z0-9\-]{10,}",
    "jwt": r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    "bearer_token": r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*",
    "api_key_assignment": (
        r"(?i:api[_\-]?key|secret|password|access[_\-]?token)[\"']?\s*[:=]\s*[\"']?"
        r"[A-Za-z0-9_\-./+]{12,}"
    ),
}

# A private key opens long before it closes: hold everything from its opening
# line until the closing line arrives.
_OPEN_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")

# Literals at least one of which every built-in secret contains (compared on
# casefolded text, so a superset): a text with none of them cannot match, and
# the big alternation (slow: it is tried at every position) is skipped.
_ANCHORS: tuple[str, ...] = (
    "-----begin", "sk-", "_live_", "_test_", "akia", "asia",
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "aiza", "xox", "eyj",
    "bearer", "api_key", "api-key", "apikey", "secret", "password",
    "access_token", "access-token", "accesstoken",
)


def _may_hold_secret(text: str) -> bool:
    """False only when no built-in pattern can match ``text``."""
    folded = text.casefold()
    for anchor in _ANCHORS:
        if anchor in folded:
            return True
    return False


class Redactor:
    """Finds and replaces secrets: the built-in provider patterns plus the
    configured ones. Compiled once per Harness."""

    def __init__(self, extra_patterns: Iterable[str] = (), window: int = 128) -> None:
        builtin = "|".join(f"(?P<{kind}>{pattern})" for kind, pattern in BUILTIN_SECRETS.items())
        self._builtin = re.compile(builtin)
        self._extra = [re.compile(p) for p in extra_patterns]
        self.window = window

    @staticmethod
    def _label(match: re.Match[str]) -> str:
        return f"[redacted:{match.lastgroup or 'secret'}]"

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``[redacted:<kind>]``."""
        out = self._builtin.sub(self._label, text) if _may_hold_secret(text) else text
        for pattern in self._extra:
            out = pattern.sub("[redacted:pattern]", out)
        return _OPEN_BLOCK.sub("[redacted:private_key]", out) if "PRIVATE KEY-----" in out else out

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets in ``text`` are (may overlap)."""
        found = (
            [m.span() for m in self._builtin.finditer(text)] if _may_hold_secret(text) else []
        )
        for pattern in self._extra:
            found.extend(m.span() for m in pattern.finditer(text))
        return found

    def stream(self) -> "StreamRedactor":
        """A redactor for one stream of text deltas."""
        return StreamRedactor(self)


class StreamRedactor:
    """Redacts a text that arrives in pieces, holding back at most
    ``window`` characters (more only while a private key block is open)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._buffer = ""

    def feed(self, delta: str) -> str:
        """Add a delta; the redacted text that is now safe to send."""
        buf = self._buffer + delta
        cut = len(buf) - self._redactor.window
        if cut <= 0:
            self._buffer = buf
            return ""
        spans = self._redactor.spans(buf)
        moved = True
        while moved:
            moved = False
            for start, end in spans:
                if start < cut < end:
                    cut, moved = start, True
        opened = _OPEN_BLOCK.search(buf)
        if opened is not None and "PRIVATE KEY-----" not in buf[opened.end():]:
            cut = min(cut, opened.start())
        if cut <= 0:
            self._buffer = buf
            return ""
        self._buffer = buf[cut:]
        return self._redactor.redact(buf[:cut])

    def flush(self) -> str:
        """The rest of the text, redacted (at the end of the stream)."""
        out, self._buffer = self._redactor.redact(self._buffer), ""
        return out

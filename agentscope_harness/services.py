"""What hooks may use besides the run: the config, the decision log, the
fleet (shared breakers and limits, through the store), the store and the
redactor. Hooks get this, never the
``Harness`` itself, so a hook cannot open, settle or drop a run."""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalBook
from .facts import Declared, declared_in
from .fleet import Breaker, Fleet
from .pii import DETECTORS, apply_pii
from .redaction import shaped_within
from .report import Decision

if TYPE_CHECKING:
    from .config import HarnessConfig
    from .redaction import Redactor
    from .run_state import RunState

log = logging.getLogger("agentscope_harness")

try:  # opentelemetry-api ships with AgentScope; without an SDK this is a no-op
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover
    _otel_trace = None  # type: ignore[assignment]


@dataclass
class Services:
    """The shared, run-independent parts of a Harness that hooks use."""

    config: HarnessConfig
    redactor: Redactor
    store: Any
    shadow: bool = False
    finish_tools: frozenset[str] = frozenset()
    approvals: ApprovalBook = field(default_factory=ApprovalBook)
    """Remembered approvals and pending budget extensions."""
    fleet: Fleet = field(init=False)
    """Breakers, rate and concurrency limits and spend reservations shared
    through ``store`` (set in ``__post_init__``)."""
    index_keys: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Per tool, the argument-name tuples its successes are indexed by (the
    ``same_args`` of every prerequisite naming it, plus ``()``)."""
    told_uninstrumented: set[str] = field(default_factory=set)
    """Tools logged as met uninstrumented (each once per Harness)."""
    declared_tools: frozenset[str] = frozenset()
    """Tools a gate reads the schema of: a prerequisite compares their
    ``same_args`` (gated or required), or they act for the principal
    (``identity_args``). Their calls carry what their schema declares
    (``ToolCallView.declared``)."""

    @classmethod
    def of(
        cls, config: HarnessConfig, redactor: Redactor, store: Any, candidate: HarnessConfig | None = None,
    ) -> Services:
        """Services for ``config``, with the derived lookups computed once;
        the success index serves the prerequisites of ``candidate`` too (a
        candidate policy judges against what the live run recorded)."""
        keys: dict[str, set[tuple[str, ...]]] = {}
        compared: set[str] = set()
        policies = [*config.tools.items(), *(candidate.tools.items() if candidate is not None else ())]
        for name, policy in policies:
            for prereq in policy.requires:
                keys.setdefault(prereq.tool, set()).add(tuple(prereq.same_args))
                if prereq.same_args:
                    compared |= {name, prereq.tool}
            if policy.identity_args or any(re.compile(claim).groupindex for claim in policy.claims):
                compared.add(name)  # a claim naming its call compares the values the tool ran with
        return cls(
            config=config,
            redactor=redactor,
            store=store,
            shadow=config.mode == "shadow",
            finish_tools=frozenset(config.finish_tools()),
            index_keys={tool: ((), *sorted(names - {()})) for tool, names in keys.items()},
            declared_tools=frozenset(compared),
        )

    def __post_init__(self) -> None:
        self.fleet = Fleet(self.config, self.store, self.record, self.scrubbed)

    @property
    def breakers(self) -> dict[str, Breaker]:
        """This process's view of each tool's breaker (what its own calls
        saw); the fleet-wide state is in the store."""
        return self.fleet.breakers

    def keys_of(self, tool: str) -> tuple[tuple[str, ...], ...]:
        """The index keys of ``tool``'s successes."""
        return self.index_keys.get(tool, _NO_NAMES)

    def declared(self, name: str, tool: Any) -> Declared | None:
        """What the schema of ``tool`` (the AgentScope tool a call of
        ``name`` was judged and validated with) declares, read now (a schema
        changed in place is read again); ``None`` for a tool no gate reads
        the schema of (``declared_tools``), or one with no schema."""
        if name not in self.declared_tools:
            return None
        return declared_in(getattr(tool, "input_schema", None))

    def scrubbed(self, text: str) -> str:
        """``text`` as the run's records state it: it may quote what a call
        carried, so its secrets are redacted (exact values too), and its
        personal data too unless ``config.record_raw``."""
        if not text:
            return text
        text = self.redactor.redact(text)
        return text if self.config.record_raw else apply_pii(text, _ALL_PII, b"").text

    def log_failure(self, what: str, exc: BaseException) -> None:
        """Log that a callable of the user's failed (``what``: which). Its
        message may quote what the call carried, so it is ``scrubbed``; the
        traceback is its frames only (their code, never their values)."""
        frames = "".join(traceback.format_tb(exc.__traceback__))
        log.warning("%s failed: %s\n%s", what, self.scrubbed(f"{type(exc).__name__}: {exc}"), frames)

    def record(
        self,
        run: RunState,
        hook: str,
        point: str,
        action: str,
        *,
        code: str | None = None,
        tool: str | None = None,
        detail: str = "",
        enforced: bool | None = None,
    ) -> Decision:
        """Record a decision: the run's report, a log line, an OTel event.
        ``detail`` may quote what a call carried (a refusal's message, an
        exception): it is ``scrubbed``, and kept to ``DETAIL_CHARS``. ``enforced`` defaults to "not in
        shadow mode"; what shadow mode does not spare (the deadline) says so."""
        decision = Decision(
            hook=hook, point=point, action=action, code=code, tool=tool,
            detail=shaped_within(detail, DETAIL_CHARS, self.scrubbed),
            enforced=not self.shadow if enforced is None else enforced,
        )
        run.record(decision)
        detail = decision.detail  # the log and the span event get what the report keeps
        log.info(
            "harness %s %s %s code=%s tool=%s %s%s",
            run.run_id, hook, action, code, tool, detail,
            "" if decision.enforced else " (shadow)",
        )
        if _otel_trace is not None:
            span = _otel_trace.get_current_span()
            if span.is_recording():
                span.add_event(
                    "harness.decision",
                    {
                        "harness.run_id": run.run_id,
                        "harness.hook": hook,
                        "harness.point": point,
                        "harness.action": action,
                        "harness.code": code or "",
                        "harness.tool": tool or "",
                        "harness.detail": detail[:500],
                        "harness.enforced": decision.enforced,
                    },
                )
        return decision


DETAIL_CHARS = 4096
"""The most of a decision's detail the report keeps (a hook may quote a
megabyte: scrubbing all of it would hold the event loop)."""
_ALL_PII = dict.fromkeys(DETECTORS, "redact")
"""Every personal-data detector, replacing what it finds with ``[pii:<kind>]``."""

_NO_NAMES: tuple[tuple[str, ...], ...] = ((),)

__all__ = ["Breaker", "Services"]

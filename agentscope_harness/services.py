"""What hooks may use besides the run: the config, the decision log, the
fleet (shared breakers and limits, through the store), the store and the
redactor. Hooks get this, never the
``Harness`` itself, so a hook cannot open, settle or drop a run."""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .approvals import ApprovalBook
from .facts import NO_DEFAULTS, frozen
from .fleet import Breaker, Fleet
from .pii import DETECTORS, apply_pii
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
    _declared: weakref.WeakKeyDictionary[Any, tuple[Any, Mapping[str, Any]]] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False, compare=False,
    )
    """Per AgentScope tool object: its schema and the defaults read from it."""

    @classmethod
    def of(cls, config: HarnessConfig, redactor: Redactor, store: Any) -> Services:
        """Services for ``config``, with the derived lookups computed once."""
        keys: dict[str, set[tuple[str, ...]]] = {}
        for policy in config.tools.values():
            for prereq in policy.requires:
                keys.setdefault(prereq.tool, set()).add(tuple(prereq.same_args))
        return cls(
            config=config,
            redactor=redactor,
            store=store,
            shadow=config.mode == "shadow",
            finish_tools=frozenset(config.finish_tools()),
            index_keys={tool: ((), *sorted(names - {()})) for tool, names in keys.items()},
        )

    def __post_init__(self) -> None:
        self.fleet = Fleet(self.config, self.store, self.record)

    @property
    def breakers(self) -> dict[str, Breaker]:
        """This process's view of each tool's breaker (what its own calls
        saw); the fleet-wide state is in the store."""
        return self.fleet.breakers

    def keys_of(self, tool: str) -> tuple[tuple[str, ...], ...]:
        """The index keys of ``tool``'s successes."""
        return self.index_keys.get(tool, _NO_NAMES)

    def defaults_of(self, agent: Any, tool: str) -> Mapping[str, Any]:
        """The defaults ``tool`` declares in ``agent``'s toolkit (read once
        per tool object and schema). A tool not registered there (an MCP
        server's tools are listed over the network: not looked for), with
        no schema, or whose default is not a JSON value declares none."""
        found = _registered(agent, tool)
        if found is None:
            return NO_DEFAULTS
        schema = getattr(found, "input_schema", None)
        try:
            cached = self._declared.get(found)
        except TypeError:  # not weakly referenceable: read every time
            return _defaults_in(schema)
        if cached is not None and cached[0] is schema:
            return cached[1]
        defaults = _defaults_in(schema)
        self._declared[found] = (schema, defaults)
        return defaults

    def scrubbed(self, text: str) -> str:
        """``text`` as the run's records state it: it may quote what a call
        carried, so its secrets are redacted (exact values too), and its
        personal data too unless ``config.record_raw``."""
        if not text:
            return text
        text = self.redactor.redact(text)
        return text if self.config.record_raw else apply_pii(text, _ALL_PII, b"").text

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
        exception): it is ``scrubbed``. ``enforced`` defaults to "not in
        shadow mode"; what shadow mode does not spare (the deadline) says so."""
        decision = Decision(
            hook=hook, point=point, action=action, code=code, tool=tool,
            detail=self.scrubbed(detail), enforced=not self.shadow if enforced is None else enforced,
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


def _registered(agent: Any, name: str) -> Any:
    """The tool ``name`` registered in ``agent``'s toolkit, as AgentScope
    resolves it (the last of that name in the basic and activated groups),
    else the last in any group; ``None`` when there is none. A scan of the
    toolkit's tools (a handful), never of the run."""
    groups = getattr(getattr(agent, "toolkit", None), "tool_groups", None)
    if not groups:
        return None
    context = getattr(getattr(agent, "state", None), "tool_context", None)
    activated = getattr(context, "activated_groups", None) or ()
    active = anywhere = None
    for group in groups:
        for tool in getattr(group, "tools", ()):
            if getattr(tool, "name", None) == name:
                anywhere = tool
                if group.name == "basic" or group.name in activated:
                    active = tool
    return active if active is not None else anywhere


def _defaults_in(schema: Any) -> Mapping[str, Any]:
    """The JSON-valued ``default`` of each property of ``schema``."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return NO_DEFAULTS
    values = {
        name: frozen(spec["default"]) for name, spec in properties.items()
        if isinstance(name, str) and isinstance(spec, dict) and "default" in spec and _json_like(spec["default"])
    }
    return MappingProxyType(values) if values else NO_DEFAULTS


def _json_like(value: Any, depth: int = 0) -> bool:
    """``value`` is a JSON value (finite numbers, string keys), as a schema
    states a default; anything else is not filled in."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth > 32:
        return False
    if isinstance(value, (list, tuple)):
        return all(_json_like(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v, depth + 1) for k, v in value.items())
    return False


_ALL_PII = dict.fromkeys(DETECTORS, "redact")
"""Every personal-data detector, replacing what it finds with ``[pii:<kind>]``."""

_NO_NAMES: tuple[tuple[str, ...], ...] = ((),)

__all__ = ["Breaker", "Services"]

"""HarnessConfig and friends: the application's policy, validated once at
construction (a bad field fails with its name), plus the few env flags for
switching things off in an incident."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from .errors import HarnessConfigError

Role = Literal[
    "retrieval",
    "planning",
    "selection",
    "lookup",
    "mutation",
    "finish",
    "ask",
    "other",
]


def _regexes(patterns: list[str]) -> list[str]:
    """Validate that every pattern compiles (the error names the pattern)."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regex {pattern!r}: {exc}") from exc
    return patterns


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class Prerequisite(_Strict):
    """``tool`` must have succeeded earlier in the run, with the same values of
    the ``same_args`` arguments (cancel needs a lookup of that very order)."""

    tool: str
    same_args: list[str] = Field(default_factory=list)


class Ledger(_Strict):
    """A per-run counter of units with a hard cap; ``soft_at`` starts the
    "stop retrieving" nudges before the cap is reached."""

    cap: int = Field(ge=0)
    soft_at: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _soft_below_cap(self) -> "Ledger":
        if self.soft_at is not None and self.soft_at > self.cap:
            raise ValueError(f"soft_at ({self.soft_at}) is above cap ({self.cap})")
        return self


class ModelPrice(_Strict):
    """USD per million input / output tokens of one model."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def usd(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of one call."""
        return (
            input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok
        ) / 1_000_000


class ToolPolicy(_Strict):
    """What the harness knows about one tool: its role in the task, what it
    costs, what must happen before it and how its success is checked."""

    role: Role = "other"
    ledgers: list[str] = Field(default_factory=list)
    units: int = Field(default=1, ge=0)
    requires: list[Prerequisite] = Field(default_factory=list)
    identity_args: dict[str, str] = Field(default_factory=dict)
    requires_facts: list[str] = Field(default_factory=list)
    waivable_facts: list[str] = Field(default_factory=list)
    verify: Callable[..., Any] | None = None
    count_results: Callable[..., Any] | None = None
    claims: list[str] = Field(default_factory=list)

    @field_validator("claims")
    @classmethod
    def _claims_compile(cls, value: list[str]) -> list[str]:
        return _regexes(value)

    @model_validator(mode="after")
    def _waivable_subset(self) -> "ToolPolicy":
        extra = set(self.waivable_facts) - set(self.requires_facts)
        if extra:
            raise ValueError(
                f"waivable_facts {sorted(extra)} are not in requires_facts",
            )
        return self


TIER_NAMES = ("lite", "minimal")


class CostPolicy(_Strict):
    """Money: a per-run cap, prices by model name, cheaper models per tier and
    a per-principal daily quota kept in the store."""

    cap_usd: float | None = Field(default=None, ge=0)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    tier_models: dict[str, Any] = Field(default_factory=dict)
    tiers: tuple[float, float, float] = (0.5, 0.2, 0.05)
    fallback_text: str = (
        "I could not finish this request within its budget. "
        "Here is where things stand; please try again or narrow the request."
    )
    daily_quota_usd: float | None = Field(default=None, ge=0)

    @field_validator("prices", mode="before")
    @classmethod
    def _price_tuples(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                name: (
                    {"input_per_mtok": p[0], "output_per_mtok": p[1]}
                    if isinstance(p, (tuple, list))
                    else p
                )
                for name, p in value.items()
            }
        return value

    @field_validator("tier_models")
    @classmethod
    def _tier_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = set(value) - set(TIER_NAMES)
        if unknown:
            raise ValueError(
                f"unknown tiers {sorted(unknown)}; use {list(TIER_NAMES)}",
            )
        return value

    @field_validator("tiers")
    @classmethod
    def _tiers_descending(cls, value: tuple[float, float, float]) -> tuple:
        if not (1 > value[0] > value[1] > value[2] >= 0):
            raise ValueError(
                f"tiers must be strictly decreasing fractions in [0, 1): {value}",
            )
        return value


class HarnessConfig(_Strict):
    """The whole policy of a Harness. Every field has a safe default: an empty
    ``HarnessConfig()`` refuses nothing and only observes."""

    tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    ledgers: dict[str, Ledger] = Field(default_factory=dict)
    cost: CostPolicy | None = None
    deadline_s: float | None = Field(default=None, gt=0)
    wrap_up_s: float | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_model_calls: int | None = Field(default=None, ge=1)
    enough_candidates: int | None = Field(default=None, ge=1)
    stall_rounds: int = Field(default=3, ge=1)
    result_max_tokens: int = Field(default=4000, ge=16)
    prune_over_tokens: int | None = Field(default=None, ge=1)
    keep_last: int = Field(default=2, ge=0)
    escape_after_rejects: int = Field(default=2, ge=1)
    loop_window: int = Field(default=6, ge=2)
    loop_threshold: int = Field(default=4, ge=2)
    breaker_failures: int = Field(default=3, ge=1)
    breaker_cooldown_s: float = Field(default=30.0, ge=0)
    max_identical_failures: int = Field(default=3, ge=1)
    require_finish_tool: bool | None = None
    max_enforce_retries: int = Field(default=1, ge=0)
    redact_patterns: list[str] = Field(default_factory=list)
    fence: bool = True
    hook_timeout_s: float | None = Field(default=5.0, gt=0)
    redact_window: int = Field(default=128, ge=16)
    mode: Literal["enforce", "shadow"] = "enforce"
    disabled_hooks: set[str] = Field(default_factory=set)
    store: Any = None
    on_report: Callable[..., Any] | None = None
    reports_kept: int = Field(default=256, ge=1)
    fallback_text: str = (
        "I could not complete this request ({reason}). "
        "Please try again, or narrow the request down."
    )

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        return _regexes(value)

    @model_validator(mode="after")
    def _references_exist(self) -> "HarnessConfig":
        for name, policy in self.tools.items():
            for ledger in policy.ledgers:
                if ledger not in self.ledgers:
                    raise ValueError(
                        f"tools.{name}.ledgers: unknown ledger {ledger!r} "
                        f"(configured: {sorted(self.ledgers)})",
                    )
        if (
            self.deadline_s is not None
            and self.wrap_up_s is not None
            and self.wrap_up_s > self.deadline_s
        ):
            raise ValueError(
                f"wrap_up_s ({self.wrap_up_s}) exceeds deadline_s ({self.deadline_s})",
            )
        if self.loop_threshold > self.loop_window:
            raise ValueError(
                f"loop_threshold ({self.loop_threshold}) exceeds "
                f"loop_window ({self.loop_window})",
            )
        return self

    # Derived views, computed from the config alone.

    def finish_tools(self) -> list[str]:
        """Names of the tools whose success ends the run."""
        return [n for n, p in self.tools.items() if p.role == "finish"]

    def finish_required(self) -> bool:
        """Whether a run may end ``completed`` only through a finish tool."""
        if self.require_finish_tool is not None:
            return self.require_finish_tool
        return bool(self.finish_tools())

    def effective_wrap_up_s(self) -> float | None:
        """Seconds before the deadline at which the run must wrap up."""
        if self.deadline_s is None:
            return None
        if self.wrap_up_s is not None:
            return self.wrap_up_s
        return min(10.0, self.deadline_s * 0.15)


def build_config(config: HarnessConfig | Mapping[str, Any] | None) -> HarnessConfig:
    """Accept a config object or a plain mapping (a policy file's content)."""
    if config is None:
        return HarnessConfig()
    if isinstance(config, HarnessConfig):
        return config
    try:
        return HarnessConfig.model_validate(dict(config))
    except Exception as exc:  # pydantic's message names the field
        raise HarnessConfigError(str(exc)) from exc


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class EnvFlags:
    """The incident switches of DESIGN section 7, read once."""

    enabled: bool = True
    mode: str | None = None
    disabled_hooks: frozenset[str] = frozenset()
    deadline_enabled: bool = True

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> "EnvFlags":
        """Parse the ``HARNESS_*`` variables; a bad value names its variable."""
        env = os.environ if environ is None else environ

        def flag(name: str) -> bool:
            raw = env.get(name, "").strip().lower()
            if raw == "" or raw in _TRUE:
                return True
            if raw in _FALSE:
                return False
            raise HarnessConfigError(
                f"{name}={env[name]!r}: expected one of 0/1/true/false",
            )

        mode = env.get("HARNESS_MODE", "").strip().lower() or None
        if mode not in (None, "enforce", "shadow"):
            raise HarnessConfigError(
                f"HARNESS_MODE={env['HARNESS_MODE']!r}: expected enforce or shadow",
            )
        disabled = frozenset(
            part.strip()
            for part in env.get("HARNESS_DISABLED_HOOKS", "").split(",")
            if part.strip()
        )
        return cls(
            enabled=flag("HARNESS_ENABLED"),
            mode=mode,
            disabled_hooks=disabled,
            deadline_enabled=flag("HARNESS_DEADLINE_ENABLED"),
        )

"""HarnessConfig and friends: the application's policy, validated once at
construction (a bad field fails with its name), plus the few env flags for
switching things off in an incident."""

from __future__ import annotations

import inspect
import os
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .errors import HarnessConfigError
from .injection import InjectionDetector, shows_nothing
from .stores import PROBE_LEASE_S, LeaseRenewal, LedgerStore, SpendStore

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


# Texts a pattern is tried on to find zero-width matches besides its
# shortest match: one of every printable ASCII character and a few others.
_EMPTY_PROBES = ("", string.printable, "é ß 中文 \u00a0\u200b —")


def _regexes(patterns: list[str], flags: int = 0) -> list[str]:
    """Validate that every pattern compiles and cannot match the empty string
    (a pattern that can would redact or claim everywhere). The error names the
    pattern and its position in the list."""
    for index, pattern in enumerate(patterns):
        try:
            compiled = re.compile(pattern, flags)
        except re.error as exc:
            # the pattern is not quoted: it may spell a secret (``re.escape(key)``), and this goes to logs
            raise ValueError(f"[{index}]: invalid regex ({len(pattern)} characters): {exc}") from exc
        if _shortest_match(pattern, flags) == 0 or any(
            m.start() == m.end() for probe in _EMPTY_PROBES for m in compiled.finditer(probe)
        ):
            raise ValueError(
                f"[{index}]: the regex ({len(pattern)} characters) can match the empty string; "
                "it would match everywhere, or take nothing where it matches",
            )
    return patterns


def _shortest_match(pattern: str, flags: int) -> int | None:
    """The fewest characters ``pattern`` can match, from Python's own regex
    parser: exact where sample texts are not (``(?<=token=)`` matches the
    empty string only after ``token=``, redacting nothing). ``None`` where
    this Python's parser is not the one read here (the samples decide)."""
    parser = getattr(re, "_parser", None)
    try:
        return int(parser.parse(pattern, flags).getwidth()[0]) if parser is not None else None
    except Exception:  # the compiled pattern is valid: the samples still judge it
        return None


def _reason_template(text: str) -> str:
    """A user-facing text formatted with ``.format(reason=...)``: the only
    placeholder allowed is ``{reason}``, braces must balance (``{{`` and ``}}``
    for literal ones). Anything else would raise at run time, in the very path
    that enforces a limit, and so silently disable it. A blank one would
    answer a stopped run's user with nothing."""
    if shows_nothing(text):  # blanks, zero-width and other invisible characters alike
        raise ValueError("a blank text would answer the user with nothing: say what happened")
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(
            f"{exc}; write literal braces as {{{{ and }}}}",
        ) from exc
    for _, field, spec, conversion in fields:
        if field is None:
            continue
        if field != "reason" or spec or conversion:
            shown = (
                "{"
                + field
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise ValueError(
                f"placeholder {shown} is not allowed: only {{reason}} is filled in "
                "(write literal braces as {{ and }})",
            )
    return text


PII_DETECTORS = ("email", "phone", "card", "iban", "ssn", "ipv4", "ipv6")
"""The built-in personal-data detectors a ``pii`` mapping may name."""

PII_MODES = ("redact", "mask", "hash", "block")
"""What a detector does with a match: replace it, keep the last 4 characters,
replace it with a per-run stable hash, or refuse the whole text."""


def _pii(value: dict[str, str]) -> dict[str, str]:
    """Validate a detector → mode mapping, naming the bad detector or mode."""
    for detector, mode in value.items():
        if detector not in PII_DETECTORS:
            raise ValueError(
                f"unknown detector {detector!r}; use one of {list(PII_DETECTORS)}",
            )
        if mode not in PII_MODES:
            raise ValueError(
                f"{detector}: unknown mode {mode!r}; use one of {list(PII_MODES)}",
            )
    return value


MIN_SECRET_CHARS = 8
"""Exact-value secrets shorter than this are refused: they would redact
ordinary words and numbers."""


def described(value: Any) -> Any:
    """What a config's JSON shows of a value only Python holds (a callable,
    a store, a model, a detector): its kind and name, never its state."""
    if value is None:
        return None
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<callable {getattr(value, '__module__', '')}.{value.__qualname__}>"
    model = getattr(value, "model", None)
    return f"<{type(value).__name__}{' ' + model if isinstance(model, str) else ''}>"


Described = PlainSerializer(described, when_used="json")
"""A field JSON cannot hold: serialised as ``described`` (a config stays
printable and its JSON valid)."""


_UNSET: Any = object()
"""A required field not given positionally: left to validation, which names
it (pydantic calls an overridden ``__init__`` for nested data too)."""


def given(**fields: Any) -> dict[str, Any]:
    """The fields actually given to a positional ``__init__``."""
    return {name: value for name, value in fields.items() if value is not _UNSET}


class _Strict(BaseModel):
    # NaN and infinity are refused in every float field: a NaN cap compares
    # false with everything and would disable its limit. Inputs are kept out
    # of error messages: a config's input may hold secret values.
    model_config = ConfigDict(
        extra="forbid",
        arbitrary_types_allowed=True,
        allow_inf_nan=False,
        hide_input_in_errors=True,
        # a field set after construction is checked as at construction
        # (``config.deadline_s = -1`` would otherwise be a limit never met)
        validate_assignment=True,
    )

    _derived: frozenset[str] = PrivateAttr(default=frozenset())
    """Fields left unset that a check worked out from the others
    (``require_finish_tool`` from the tools, a tool's ``injection`` from its
    role): worked out again when a field is set after construction."""

    def __eq__(self, other: object) -> bool:
        # equal values are equal configs, whichever were worked out (a round trip writes them all)
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models are

    def _derive(self, name: str, value: Any) -> None:
        """Fill in an unset field from the others (inside a model check)."""
        self.__dict__[name] = value
        self._derived = self._derived | {name}  # a new set: a copy of the model shares the old

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            return super().__setattr__(name, value)
        before, derived = dict(self.__dict__), self._derived
        for field in derived - {name}:  # worked out again from the new value (``name`` is the caller's now)
            self.__dict__[field] = None
        self._derived = frozenset()
        try:
            super().__setattr__(name, value)
        except ValidationError:  # refused: nothing changes (pydantic keeps a value a model check refused)
            self.__dict__.clear()
            self.__dict__.update(before)
            self._derived = derived
            raise
        return None

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads True as 1 in a number field: Ledger(cap=True) would
        # be a cap of one unit, a typo's limit nobody meant
        if not info.field_name:
            return value
        annotation = cls.model_fields[info.field_name].annotation
        if _is_bool(value) and not _takes_bool(annotation):
            raise ValueError("a boolean where a number or text is expected")
        if isinstance(value, (tuple, list)) and _numbers_only(annotation) and any(_is_bool(v) for v in value):
            raise ValueError("a boolean where a number is expected")  # tiers=(0.5, 0.2, False): a rung at 0
        return value


def _numbers_only(annotation: Any) -> bool:
    """Whether ``annotation`` is a tuple or list of numbers (``tiers``)."""
    return get_origin(annotation) in (tuple, list) and all(a in (int, float, Ellipsis) for a in get_args(annotation))


def _is_bool(value: Any) -> bool:
    """A boolean, Python's or NumPy's (``df.x.any()`` returns ``numpy.bool_``)."""
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def _takes_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any:
        return True
    return get_origin(annotation) in (Union, type(int | None)) and any(map(_takes_bool, get_args(annotation)))


class Prerequisite(_Strict):
    """``tool`` must have succeeded earlier in the run, with the same values of
    the ``same_args`` arguments (cancel needs a lookup of that very order)."""

    tool: str
    same_args: list[str] = Field(default_factory=list)

    def __init__(self, tool: str = _UNSET, same_args: list[str] = _UNSET, **data: Any) -> None:
        # positional as DESIGN writes it: Prerequisite("lookup_order", ["order_id"])
        super().__init__(**given(tool=tool, same_args=same_args, **data))


Exhausted = Literal["stop", "ask"]
"""What happens when a limit runs out: stop the run, or park it and ask a
human whether to extend (the extension is recorded in the report)."""


class Ledger(_Strict):
    """A per-run counter of units with a hard cap; ``soft_at`` starts the
    "stop retrieving" nudges before the cap is reached."""

    cap: int = Field(ge=0)
    soft_at: int | None = Field(default=None, ge=0)
    on_exhausted: Exhausted = "stop"
    extend_by: int | None = Field(default=None, ge=1)
    """Units one approved extension adds (``on_exhausted="ask"``); default:
    the cap again."""

    def __init__(self, cap: int = _UNSET, soft_at: int | None = _UNSET, **data: Any) -> None:
        # positional as DESIGN writes it: Ledger(8) or Ledger(8, 6)
        super().__init__(**given(cap=cap, soft_at=soft_at, **data))

    @model_validator(mode="after")
    def _soft_below_cap(self) -> Ledger:
        if self.soft_at is not None and self.soft_at > self.cap:
            raise ValueError(f"soft_at ({self.soft_at}) is above cap ({self.cap})")
        return self


class ModelPrice(_Strict):
    """USD per million input / output tokens of one model. A plain
    ``(input, output)`` or ``(input, output, cached_input)`` tuple is accepted
    wherever a price is."""

    # strict: a price is a number, never "1.5" or True
    input_per_mtok: float = Field(ge=0, strict=True)
    output_per_mtok: float = Field(ge=0, strict=True)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, strict=True)
    """Price of input tokens served from the provider's prompt cache; ``None``:
    the same as ``input_per_mtok``."""

    def __init__(
        self, input_per_mtok: float = _UNSET, output_per_mtok: float = _UNSET,
        cached_input_per_mtok: float | None = _UNSET, **data: Any,
    ) -> None:
        # positional as DESIGN writes it: ModelPrice(0.15, 0.60)
        super().__init__(**given(
            input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok,
            cached_input_per_mtok=cached_input_per_mtok, **data,
        ))

    @model_validator(mode="before")
    @classmethod
    def _from_tuple(cls, value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            if len(value) not in (2, 3):
                raise ValueError(
                    f"a price tuple is (input, output) or (input, output, cached_input) "
                    f"USD per million tokens; got {len(value)} values",
                )
            keys = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok")
            return dict(zip(keys, value, strict=False))
        return value

    def usd(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """The cost of one call; ``cached_input_tokens`` of its input were
        served from the provider's prompt cache (at ``cached_input_per_mtok``)."""
        cached = min(cached_input_tokens, input_tokens)
        cached_price = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        return (
            (input_tokens - cached) * self.input_per_mtok + cached * cached_price
            + output_tokens * self.output_per_mtok
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
    verify: Annotated[Callable[..., Any] | None, Described] = None
    count_results: Annotated[Callable[..., Any] | None, Described] = None
    claims: list[str] = Field(default_factory=list)
    ask_when: Annotated[Callable[..., Any] | None, Described] = None
    """``args -> reason | None``: a reason parks the call for a human's
    approval instead of running it."""
    pii: dict[str, str] = Field(default_factory=dict)
    """Detector → mode for this tool's results (see ``PII_DETECTORS``,
    ``PII_MODES``)."""
    injection: Literal["off", "flag", "block"] | None = None
    """What to do with instructions addressed to the model inside this tool's
    results; ``None`` (the default) becomes ``flag`` for a retrieval tool and
    ``off`` for the rest."""

    @field_validator("claims")
    @classmethod
    def _claims_compile(cls, value: list[str]) -> list[str]:
        # claims are searched case-insensitively in the answer
        return _regexes(value, re.IGNORECASE)

    @field_validator("pii")
    @classmethod
    def _pii_known(cls, value: dict[str, str]) -> dict[str, str]:
        return _pii(value)

    @field_validator("ledgers")
    @classmethod
    def _ledgers_once(cls, value: list[str]) -> list[str]:
        # a ledger named twice would be charged twice a call: its cap silently halved
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"ledger(s) {twice} named more than once; name each ledger once")
        return value

    @model_validator(mode="after")
    def _waivable_subset(self) -> ToolPolicy:
        extra = set(self.waivable_facts) - set(self.requires_facts)
        if extra:
            raise ValueError(
                f"waivable_facts {sorted(extra)} are not in requires_facts",
            )
        return self

    @model_validator(mode="after")
    def _verify_finishes(self) -> ToolPolicy:
        # a result is verified when the model delivers it (a finishing tool's): elsewhere never called
        if self.verify is not None and self.role != "finish":
            raise ValueError(f"verify: only a finishing tool's result is verified (role={self.role!r})")
        return self

    @model_validator(mode="after")
    def _units_charge_ledgers(self) -> ToolPolicy:
        # zero units would never charge the ledgers named: their caps silently off
        if self.ledgers and self.units == 0:
            raise ValueError(
                f"units: 0 units never charge the ledger(s) {self.ledgers}; use at least 1, "
                "or drop the ledgers",
            )
        return self

    @model_validator(mode="after")
    def _injection_default(self) -> ToolPolicy:
        # read back as in force: ``flag`` for retrieval tools (they bring
        # outside text in), ``off`` for the rest
        if self.injection is None:
            self._derive("injection", "flag" if self.role == "retrieval" else "off")
        return self

    def injection_mode(self) -> str:
        """The injection policy in force (``injection``, resolved at construction)."""
        return self.injection or "off"


TIER_NAMES = ("lite", "minimal")


class CostPolicy(_Strict):
    """Money: a per-run cap, prices by model name, cheaper models per tier and
    a per-principal daily quota kept in the store."""

    cap_usd: float | None = Field(default=None, ge=0)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    tier_models: dict[str, Annotated[Any, Described]] = Field(default_factory=dict)
    tiers: tuple[float, float, float] = (0.5, 0.2, 0.05)
    fallback_text: str = (
        "I could not finish this request within its budget. "
        "Here is where things stand; please try again or narrow the request."
    )
    daily_quota_usd: float | None = Field(default=None, ge=0)
    on_exhausted: Exhausted = "stop"
    max_input_tokens: int | None = Field(default=None, ge=1)
    """Input tokens per run, all model calls summed (sub-agents included)."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output tokens per run, all model calls summed."""
    max_request_input_tokens: int | None = Field(default=None, ge=1)
    """Input tokens of one model call, checked before the call is made."""
    unpriced: Literal["error"] | ModelPrice = "error"
    """What a model name missing from ``prices`` costs: ``"error"`` refuses
    to charge it $0 (the run stops, naming the model), or a stated price,
    best a conservative one."""

    @field_validator("fallback_text")
    @classmethod
    def _fallback_placeholders(cls, value: str) -> str:
        return _reason_template(value)

    def model_for(self, tier: str) -> Any:
        """The cheaper model that serves a budget ``tier``; ``None``: the run keeps its own."""
        serving = self.serving_tier(tier)
        return None if serving is None else self.tier_models[serving]

    def serving_tier(self, tier: str) -> str | None:
        """The tier whose model serves budget ``tier`` (``lite`` serves
        ``minimal`` when that has none); ``None``: the run keeps its own."""
        if tier == "full":
            return None
        return next((name for name in (tier, "lite") if self.tier_models.get(name) is not None), None)

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

    @model_validator(mode="after")
    def _tier_models_priced(self) -> CostPolicy:
        # With a limit on money, a model charged $0 would spend without limit.
        if self.cap_usd is None and self.daily_quota_usd is None:
            return self
        unpriced = self.unpriced
        if unpriced != "error" and unpriced.input_per_mtok == 0 and unpriced.output_per_mtok == 0:
            raise ValueError(
                "unpriced: a $0 price for every model missing from prices lets a mistyped or "
                "unexpected model spend without limit under cap_usd/daily_quota_usd; state a "
                "conservative price, or list the free models in prices",
            )
        for tier, model in self.tier_models.items():
            name = getattr(model, "model", None)
            if not isinstance(name, str) or not name:
                raise ValueError(
                    f"tier_models.{tier}: {type(model).__name__} has no model name "
                    "(its `model` attribute) to price it by",
                )
            if not self.priced(name):
                raise ValueError(
                    f"tier_models.{tier}: model {name!r} has no price; add it to "
                    f"prices (priced: {sorted(self.prices)}) or set unpriced",
                )
        return self

    def price_of(self, model_name: str) -> ModelPrice | None:
        """The price of a model name: its listed price, else the ``unpriced``
        price, else ``None`` (unpriced is ``"error"``: the caller must refuse)."""
        price = self.prices.get(model_name)
        if price is not None:
            return price
        return None if self.unpriced == "error" else self.unpriced

    def priced(self, model_name: str) -> bool:
        """Whether a call of this model can be charged."""
        return self.price_of(model_name) is not None


class RateLimit(_Strict):
    """Calls and tokens per minute, shared through the store by every process.
    ``calls_per_min`` counts model calls, or calls of ``tool`` when it is set;
    ``tokens_per_min`` counts model tokens (input + output) and so cannot be
    set with ``tool``. ``scope`` is whose calls share the limit: each
    principal's, each tenant's, or everyone's (``"tool"``, needs ``tool``).
    A limited call waits up to ``wait_s`` (within the deadline), then is
    refused as ``rate_limited``."""

    scope: Literal["principal", "tenant", "tool"]
    calls_per_min: int | None = Field(default=None, ge=1)
    tokens_per_min: int | None = Field(default=None, ge=1)
    tool: str | None = Field(default=None, min_length=1)
    wait_s: float = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _meaningful(self) -> RateLimit:
        if self.calls_per_min is None and self.tokens_per_min is None:
            raise ValueError("set calls_per_min or tokens_per_min (or both)")
        if self.scope == "tool" and self.tool is None:
            raise ValueError("scope 'tool' needs the tool's name in `tool`")
        if self.tool is not None and self.tokens_per_min is not None:
            raise ValueError(
                f"tokens_per_min counts model tokens; it cannot limit tool {self.tool!r}",
            )
        return self


LONGEST_LEASE_S = 366 * 86400.0


class ConcurrencyLimit(_Strict):
    """How many things may be in flight at once, shared through the store:
    runs of a principal or tenant, or calls of ``tool`` when it is set (per
    principal, per tenant, or everyone's for scope ``"tool"``). Each slot is a
    lease that expires after ``lease_s``, so a crashed process frees its slots."""

    scope: Literal["principal", "tenant", "tool"]
    max_in_flight: int = Field(ge=1)
    tool: str | None = Field(default=None, min_length=1)
    lease_s: float = Field(default=300, ge=0.1, le=LONGEST_LEASE_S)
    """At least 0.1 s: a lease renewed four times per ``lease_s`` cannot be
    kept much shorter (a 1 ms lease lapsed between renewals, and the limit
    held nothing across processes); at most a year (Redis holds no longer
    an expiry: 1e16 s failed every run ``dependency_down``)."""

    @model_validator(mode="after")
    def _tool_scope(self) -> ConcurrencyLimit:
        if self.scope == "tool" and self.tool is None:
            raise ValueError("scope 'tool' needs the tool's name in `tool`")
        return self


def _store_methods(protocol: type = SpendStore) -> tuple[str, ...]:
    """The async methods of a store protocol: the daily spend alone
    (``SpendStore``), or everything shared between runs (``LedgerStore``)."""
    return tuple(
        name
        for name, member in vars(protocol).items()
        if inspect.iscoroutinefunction(member)
    )


def _missing_methods(store: Any, protocol: type) -> tuple[list[str], tuple[str, ...]]:
    required = _store_methods(protocol)
    return [n for n in required if not inspect.iscoroutinefunction(getattr(store, n, None))], required


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
    breaker_cooldown_s: float = Field(default=30.0, gt=0)  # 0 would never refuse: no breaker
    max_identical_failures: int = Field(default=3, ge=1)
    require_finish_tool: bool | None = None
    max_enforce_retries: int = Field(default=1, ge=0)
    redact_patterns: list[str] = Field(default_factory=list)
    fence: bool = True
    hook_timeout_s: float = Field(default=5.0, gt=0)  # None would let one async hook hold a reply forever
    redact_window: int = Field(default=128, ge=16)
    mode: Literal["enforce", "shadow"] = "enforce"
    disabled_hooks: set[str] = Field(default_factory=set)
    store: Annotated[Any, Described] = None
    on_report: Annotated[Callable[..., Any] | None, Described] = None
    reports_kept: int = Field(default=256, ge=1)
    fallback_text: str = (
        "I could not complete this request ({reason}). "
        "Please try again, or narrow the request down."
    )
    pii: dict[str, str] = Field(default_factory=dict)
    """Detector → mode for the final answer (see ``PII_DETECTORS``)."""
    secret_values: list[str] = Field(default_factory=list, repr=False)
    """Exact values redacted wherever they appear, even where no pattern
    matches; at least ``MIN_SECRET_CHARS`` characters each."""
    secret_env: list[str] = Field(default_factory=list)
    """Names of environment variables whose values are secrets; see
    ``resolved_secret_values``."""
    rate_limits: list[RateLimit] = Field(default_factory=list)
    concurrency_limits: list[ConcurrencyLimit] = Field(default_factory=list)
    disclose_budget: Literal["changes", "every_call", "off"] = "changes"
    """When the model is told what is left of its budget: when the tier
    changes, before every call, or never."""
    model_error_text: str | None = None
    """The answer when the model provider fails for good (``{reason}`` is
    filled in); ``None``: the run fails with the provider's error."""
    record_raw: bool = False
    """Reports, decisions and traces carry raw tool arguments and results
    only when this is set (and then redacted): they may hold personal data."""
    injection_detector: Annotated[Any, Described] = None
    """What scores tool results for injected instructions (an
    ``InjectionDetector``); ``None``: the built-in ``HeuristicDetector``."""

    @field_validator("redact_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        return _regexes(value)

    @field_validator("rate_limits", "concurrency_limits")
    @classmethod
    def _limits_once(cls, value: list[Any]) -> list[Any]:
        """Two entries for the same scope and tool count on one shared key,
        each taking its unit: the limit would silently hold half (or none)
        of what either says. One entry per scope and tool."""
        seen: set[tuple[str, str | None]] = set()
        for index, limit in enumerate(value):
            key = (limit.scope, limit.tool)
            if key in seen:
                what = f"tool {limit.tool!r}" if limit.tool is not None else "model calls" if isinstance(
                    limit, RateLimit) else "runs"
                raise ValueError(
                    f"[{index}]: a second limit on {what} for scope {limit.scope!r}: the two would share "
                    "one count and each take from it; combine them into one entry",
                )
            seen.add(key)
        return value

    @field_validator("injection_detector")
    @classmethod
    def _detector_protocol(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, InjectionDetector):
            raise ValueError("injection_detector must have a score(text) -> InjectionVerdict method")
        return value

    @field_validator("fallback_text", "model_error_text")
    @classmethod
    def _reason_placeholders(cls, value: str | None) -> str | None:
        return None if value is None else _reason_template(value)

    @field_validator("pii")
    @classmethod
    def _pii_known(cls, value: dict[str, str]) -> dict[str, str]:
        return _pii(value)

    @field_validator("secret_values")
    @classmethod
    def _secrets_long(cls, value: list[str]) -> list[str]:
        # never echo a value: the message goes to logs
        for index, secret in enumerate(value):
            if shows_nothing(secret):  # zero-width characters too, as the fallback texts count them
                raise ValueError(f"[{index}]: a blank or invisible secret value would match runs of spacing")
            if len(secret) < MIN_SECRET_CHARS:
                raise ValueError(
                    f"[{index}]: a secret value of {len(secret)} characters is too "
                    f"short (at least {MIN_SECRET_CHARS}); it would redact ordinary text",
                )
        return value

    @field_validator("secret_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for index, name in enumerate(value):
            if not name or "=" in name or name != name.strip():
                shown = f"{name.partition('=')[0]!r} followed by '=...'" if "=" in name else repr(name)
                raise ValueError(  # never what follows an '=': a .env line's value is the secret
                    f"[{index}]: {shown} is not an environment variable name"
                )
        return value

    @field_validator("store")
    @classmethod
    def _store_protocol(cls, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, type):
            # ValueError, not TypeError: pydantic turns only ValueError into a field error
            msg = f"pass a store instance ({value.__name__}()), not the class"
            raise ValueError(msg)
        missing, required = _missing_methods(value, SpendStore)
        if missing:
            raise ValueError(
                f"{type(value).__name__} does not satisfy the store protocol: "
                f"no async {', '.join(missing)} (needs async {', '.join(required)})",
            )
        return value

    @model_validator(mode="after")
    def _references_exist(self) -> HarnessConfig:
        """The checks that relate fields (a tool's ledgers exist, ``wrap_up_s``
        within ``deadline_s``, ...): at construction, on each assignment, and
        when a ``Harness`` is built (``build_config`` checks every value again)."""
        if self.store is not None and (self.rate_limits or self.concurrency_limits):
            missing, _ = _missing_methods(self.store, LedgerStore)
            if self.concurrency_limits:  # a slot is renewed while its run or call lasts
                missing += _missing_methods(self.store, LeaseRenewal)[0]
            if missing:
                raise ValueError(
                    f"store: rate and concurrency limits are shared through the store, and "
                    f"{type(self.store).__name__} has no async {', '.join(missing)}",
                )
        state_ttl_s = getattr(self.store, "state_ttl_s", None)  # RedisStore's: an open breaker's life
        least = self.breaker_cooldown_s + PROBE_LEASE_S + 1  # open, then its probe's lease
        if isinstance(state_ttl_s, (int, float)) and state_ttl_s < least:
            raise ValueError(
                f"store.state_ttl_s ({state_ttl_s}) is shorter than breaker_cooldown_s "
                f"({self.breaker_cooldown_s}) and the probe's {PROBE_LEASE_S:g} s lease, plus 1 s: "
                "an open breaker would be forgotten before its one probe",
            )
        for name, policy in self.tools.items():
            for ledger in policy.ledgers:
                if ledger not in self.ledgers:
                    raise ValueError(
                        f"tools.{name}.ledgers: unknown ledger {ledger!r} "
                        f"(configured: {sorted(self.ledgers)})",
                    )
        charged = {ledger for policy in self.tools.values() for ledger in policy.ledgers}
        for ledger in self.ledgers:  # a ledger is charged only through a tool's policy: its cap would be off
            if ledger not in charged:
                raise ValueError(f"ledgers.{ledger}: no tool policy charges it (ToolPolicy.ledgers)")
        if self.enough_candidates is not None and not any(p.role == "retrieval" for p in self.tools.values()):
            raise ValueError(
                "enough_candidates: no tool policy has role='retrieval', the only calls it refuses",
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
        if self.require_finish_tool and not self.finish_tools():
            raise ValueError(
                "require_finish_tool: true, but no tool has role 'finish'; "
                "no run could ever complete",
            )
        if self.require_finish_tool is None:  # read back as in force
            self._derive("require_finish_tool", bool(self.finish_tools()))
        self.resolved_secret_values()
        return self

    # Derived views, computed from the config alone.

    def finish_tools(self) -> list[str]:
        """Names of the tools whose success ends the run."""
        return [n for n, p in self.tools.items() if p.role == "finish"]

    def finish_required(self) -> bool:
        """Whether a run may end ``completed`` only through a finish tool."""
        return bool(self.require_finish_tool)

    def effective_wrap_up_s(self) -> float | None:
        """Seconds before the deadline at which the run must wrap up."""
        if self.deadline_s is None:
            return None
        if self.wrap_up_s is not None:
            return self.wrap_up_s
        return self.default_wrap_up_s(self.deadline_s)

    @staticmethod
    def default_wrap_up_s(span_s: float) -> float:
        """The default wrap-up window of a run with ``span_s`` seconds: 15 %, at most 10 s."""
        return min(10.0, span_s * 0.15)

    def resolved_secret_values(
        self,
        environ: Mapping[str, str] | None = None,
    ) -> list[str]:
        """``secret_values`` plus the values of the ``secret_env`` variables
        (from ``os.environ`` by default), without duplicates. An unset, empty
        or blank variable holds no secret in this process and is skipped; a value
        shorter than ``MIN_SECRET_CHARS`` raises ``HarnessConfigError`` naming
        the variable (checked at construction too)."""
        env = os.environ if environ is None else environ
        values = list(self.secret_values)
        for name in self.secret_env:
            secret = env_secret(env.get(name, ""))
            if not secret:  # unset, empty or blank: no secret in this process
                continue
            if len(secret) < MIN_SECRET_CHARS:
                raise HarnessConfigError(
                    f"secret_env: the value of {name} has {len(secret)} characters, "
                    f"too short to redact (at least {MIN_SECRET_CHARS})",
                )
            values.append(secret)
        return list(dict.fromkeys(values))


def env_secret(value: str) -> str:
    """A ``secret_env`` variable's secret: its value without the whitespace
    around it (a secret mounted from a file arrives with its newline, and a
    tool that echoes the credential echoes it without)."""
    return value.strip()


def build_config(config: HarnessConfig | Mapping[str, Any] | None) -> HarnessConfig:
    """Accept a config object or a plain mapping (a policy file's content)."""
    if config is None:
        return HarnessConfig()
    if isinstance(config, HarnessConfig):
        try:  # every value again: one set on a nested model, or a list or dict edited in place, since
            checked = HarnessConfig.model_validate(_as_given(config))
        except ValidationError as exc:
            raise HarnessConfigError(str(exc)) from exc
        _worked_out_again(config, checked)
        return config
    if isinstance(config, (str, bytes, os.PathLike)):
        raise HarnessConfigError(
            f"config: a HarnessConfig or a mapping (a policy file's content) is expected, not {config!r}; "
            "read the file into a mapping first",
        )
    try:  # its models as given (a price tuple put into one in place is checked as a price)
        return HarnessConfig.model_validate(_as_given(dict(config)))
    except Exception as exc:  # pydantic's message names the field
        raise HarnessConfigError(str(exc)) from exc


def _as_given(value: Any) -> Any:
    """A config's values as they would be given to build it again: its own
    models as mappings of their fields (those worked out from others left
    out, to be worked out again), containers copied, every other object
    (a store, a detector, a callable) as it is."""
    kind = type(value)
    if kind in _OWN_MODELS:  # a subclass (fields of its own) is given as it is, as any other object
        derived = value._derived
        return {name: _as_given(getattr(value, name)) for name in kind.model_fields if name not in derived}
    if kind is dict:
        return {key: _as_given(item) for key, item in value.items()}
    if kind in (list, tuple, set, frozenset):
        return kind(_as_given(item) for item in value)
    return value


_OWN_MODELS = frozenset({
    Prerequisite, Ledger, ModelPrice, ToolPolicy, CostPolicy, RateLimit, ConcurrencyLimit, HarnessConfig,
})
"""The models a config is built of (given again field by field)."""


def _worked_out_again(mine: Any, checked: Any) -> None:
    """Each field ``mine`` worked out from others takes the value worked out
    from what it holds now (``checked``: it built again): a finish tool
    added through a nested model or a dict still requires finishing. A
    value put into a dict or list in place as its model's input (a price
    tuple, a tool policy as a mapping) takes the model it was checked as:
    the harness reads models, never their inputs."""
    if isinstance(mine, _Strict) and isinstance(checked, _Strict):
        for name in mine._derived:
            mine.__dict__[name] = checked.__dict__[name]
        for name in type(mine).model_fields:
            _worked_out_again(getattr(mine, name), getattr(checked, name))
    elif isinstance(mine, dict) and isinstance(checked, dict):
        for key, item in mine.items():
            if key in checked:
                _worked_out_again(item, checked[key])
                if _taken_as_model(item, checked[key]):
                    mine[key] = checked[key]
    elif isinstance(mine, (list, tuple)) and isinstance(checked, (list, tuple)):
        for index, (item, again) in enumerate(zip(mine, checked, strict=False)):
            _worked_out_again(item, again)
            if isinstance(mine, list) and _taken_as_model(item, again):
                mine[index] = again


def _taken_as_model(given: Any, checked: Any) -> bool:
    """``given`` is a model's input (not the model) that was checked as one."""
    return type(checked) in _OWN_MODELS and type(given) is not type(checked)


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
    def read(cls, environ: Mapping[str, str] | None = None) -> EnvFlags:
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

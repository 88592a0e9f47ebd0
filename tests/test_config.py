"""Bad configuration fails at construction, with the field named (issue 10
item 16, issue 11 item 3), and the 0.2 configuration names (DESIGN 3.2)."""

from __future__ import annotations

import json
import math
import typing
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    HarnessConfigError,
    Ledger,
    MemoryStore,
    ModelPrice,
    Prerequisite,
    RateLimit,
    ToolPolicy,
)
from agentscope_harness.cli import main
from agentscope_harness.config import (
    MIN_SECRET_CHARS,
    PII_DETECTORS,
    PII_MODES,
    _store_methods,
    build_config,
)
from agentscope_harness.injection import shows_nothing
from agentscope_harness.testing import ScriptedModel

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def rejected(build: Any, *fragments: str) -> str:
    """Build, expect a ValidationError, and check the message names each fragment."""
    with pytest.raises(ValidationError) as info:
        build()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    return message


def cfg(**kw: Any) -> HarnessConfig:
    return HarnessConfig.model_validate(kw)


def cost_policy(**kw: Any) -> CostPolicy:
    """A CostPolicy from loose input (price tuples, invalid values)."""
    return CostPolicy.model_validate(kw)


def tool_policy(**kw: Any) -> ToolPolicy:
    return ToolPolicy.model_validate(kw)


# ------------------------------------------------------------ fallback_text

BAD_TEMPLATES = [
    "Sorry {user}",
    "Sorry {}",
    "Sorry {0}",
    "Sorry {reason!r}",
    "Sorry {reason:>20}",
    "Sorry {reason.upper}",
    "Sorry {reason[0]}",
    "Sorry {reason",
    "Sorry reason}",
    "{reason} {",
    "{reason:{reason}}",
]


@pytest.mark.parametrize("text", BAD_TEMPLATES)
@pytest.mark.parametrize("field", ["fallback_text", "model_error_text"])
def test_a_reason_text_with_another_placeholder_is_refused(text: str, field: str) -> None:
    message = rejected(lambda: cfg(**{field: text}), field)
    assert "{{" in message  # says how to write a literal brace


@pytest.mark.parametrize("text", BAD_TEMPLATES)
def test_the_cost_fallback_text_is_checked_the_same_way(text: str) -> None:
    rejected(lambda: cfg(cost={"fallback_text": text}), "cost.fallback_text")


@pytest.mark.parametrize(
    "text", ["No placeholder.", "Stopped: {reason}.", "{{literal}} {reason} {reason}", "{reason}"],
)
def test_reason_texts_that_format_are_accepted(text: str) -> None:
    config = cfg(fallback_text=text, model_error_text=text, cost={"fallback_text": text})
    assert config.fallback_text.format(reason="x") == text.format(reason="x")
    assert config.cost is not None and config.cost.fallback_text == text


def test_the_default_texts_are_valid_templates() -> None:
    config = HarnessConfig()
    assert "budget" in config.fallback_text.format(reason="budget")
    assert config.model_error_text is None
    assert CostPolicy().fallback_text.format(reason="x")


PLACEHOLDER = st.builds(
    lambda field, conversion, spec: "{" + field + conversion + spec + "}",
    st.sampled_from(["reason", "", "0", "user", "reason.upper", "reason[0]", "reason ", "REASON"]),
    st.sampled_from(["", "!r", "!s", "!x"]),
    st.sampled_from(["", ":", ":>5", ":d", ":{reason}", ":{}"]),
)
TEMPLATE_PART = st.one_of(
    PLACEHOLDER,
    st.sampled_from(["{", "}", "{{", "}}", "{reason}", "reason", " "]),
    st.text(max_size=4),
)


@PROPS
@given(st.lists(TEMPLATE_PART, max_size=8).map("".join))
def test_whatever_passes_validation_formats_with_a_reason(text: str) -> None:
    try:
        config = HarnessConfig(fallback_text=text)
    except ValidationError as exc:
        assert "fallback_text" in str(exc)
        return
    for reason in ("x", "", "{user}", "a}b{"):
        out = config.fallback_text.format(reason=reason)
        assert isinstance(out, str)


@PROPS
@given(
    st.lists(
        st.one_of(
            st.just("{reason}"), st.just("{{"), st.just("}}"),
            st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=5),
        ),
        max_size=10,
    ),
)
def test_every_well_formed_reason_template_is_accepted(parts: list[str]) -> None:
    text = "".join(parts)
    if shows_nothing(text):  # a blank answer is refused: the user would be told nothing
        rejected(lambda: HarnessConfig(fallback_text=text), "fallback_text")
        return
    config = HarnessConfig(fallback_text=text)
    expected = "".join(
        {"{reason}": "R", "{{": "{", "}}": "}"}.get(part, part) for part in parts
    )
    assert config.fallback_text.format(reason="R") == expected


# ------------------------------------------------------- patterns matching ""


@pytest.mark.parametrize("pattern", ["", "a*", "^", "$", r"\b", "(?=x)", "x?", "(?<=-)", "sk-.*|"])
def test_a_redact_pattern_that_matches_the_empty_string_is_refused(pattern: str) -> None:
    message = rejected(
        lambda: cfg(redact_patterns=["sk-[a-z]{8,}", pattern]), "redact_patterns", "[1]",
    )
    assert "empty string" in message


@pytest.mark.parametrize("pattern", ["", "(cancelled)?", r"\s*", "(?i)|refund"])
def test_a_claim_that_matches_the_empty_string_is_refused(pattern: str) -> None:
    rejected(
        lambda: cfg(tools={"cancel": {"role": "mutation", "claims": [pattern]}}),
        "tools.cancel.claims", "empty string",
    )


def test_an_invalid_regex_is_named() -> None:
    """By its place and Python's reason, never quoted: a pattern may spell a secret."""
    rejected(lambda: cfg(redact_patterns=["(unclosed"]), "redact_patterns", "[0]: invalid regex", "missing )")
    with pytest.raises(ValueError) as caught:
        cfg(redact_patterns=["(unclosed"])
    assert "(unclosed" not in str(caught.value)


def test_ordinary_patterns_are_accepted() -> None:
    config = cfg(
        redact_patterns=[r"ACME-\d{6}", r"\bpin=\d+"],
        tools={"cancel": {"claims": [r"has been cancel+ed", r"\bcancelled\b"]}},
    )
    assert config.redact_patterns == [r"ACME-\d{6}", r"\bpin=\d+"]
    assert config.tools["cancel"].claims == [r"has been cancel+ed", r"\bcancelled\b"]


# ----------------------------------------------------------------- store


class SyncStore:
    def get_spend(self, key: str, day: str | None = None) -> float:
        return 0.0

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        return usd


class AsyncStore:
    async def get_spend(self, key: str, day: str | None = None) -> float:
        return 0.0

    async def add_spend(self, key: str, usd: float, day: str | None = None) -> float:
        return usd


def test_the_store_protocol_checked_includes_spend() -> None:
    assert {"get_spend", "add_spend"} <= set(_store_methods())


def test_a_store_without_the_protocol_is_refused_naming_what_is_missing() -> None:
    message = rejected(lambda: cfg(store=object()), "store", "get_spend", "add_spend")
    assert "object does not satisfy the store protocol" in message
    message = rejected(lambda: cfg(store=SyncStore()), "store", "SyncStore", "no async get_spend")
    assert "no async get_spend, add_spend" not in message


def test_a_store_class_instead_of_an_instance_is_refused() -> None:
    rejected(lambda: cfg(store=MemoryStore), "store", "MemoryStore()")


def test_stores_with_the_protocol_are_accepted() -> None:
    for store in (MemoryStore(), AsyncStore()):
        assert cfg(store=store).store is store
    assert cfg().store is None


# ----------------------------------------------------------------- prices


@pytest.mark.parametrize(
    "price",
    [
        (-1.0, 2.0),
        (1.0, -0.5),
        (math.nan, 1.0),
        (1.0, math.inf),
        (1.0,),
        (1.0, 2.0, 3.0, 4.0),
        (),
        ("1.5", 2.0),
        (True, 2.0),
        (None, 1.0),
        (1.0, 2.0, -1.0),
        {"input_per_mtok": 1.0},
        "cheap",
    ],
)
def test_a_malformed_price_names_the_model(price: Any) -> None:
    rejected(lambda: cfg(cost={"prices": {"gpt-x": price}}), "cost.prices.gpt-x")
    rejected(lambda: cost_policy(prices={"gpt-x": price}), "prices.gpt-x")


def test_prices_as_tuples_of_two_or_three_numbers() -> None:
    cost = cost_policy(prices={"a": (1, 2), "b": [0.5, 4.0, 0.05], "c": ModelPrice(input_per_mtok=3, output_per_mtok=6)})
    assert cost.prices["a"] == ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)
    assert cost.prices["a"].cached_input_per_mtok is None
    assert cost.prices["b"].cached_input_per_mtok == 0.05
    assert cost.prices["c"].usd(1_000_000, 500_000) == 6.0


# ---------------------------------------------------- unpriced tier models


def model(name: str) -> ScriptedModel:
    return ScriptedModel([], model=name)


@pytest.mark.parametrize("limit", [{"cap_usd": 0.5}, {"daily_quota_usd": 2.0}])
def test_an_unpriced_tier_model_under_a_money_limit_is_refused(limit: dict[str, float]) -> None:
    rejected(
        lambda: cost_policy(prices={"big": (2, 8)}, tier_models={"lite": model("small")}, **limit),
        "tier_models.lite", "'small'",
    )
    rejected(
        lambda: cfg(cost=cost_policy(prices={"big": (2, 8)}, tier_models={"minimal": model("tiny")}, **limit)),
        "tier_models.minimal", "'tiny'",
    )


def test_a_tier_model_without_a_name_is_refused_under_a_limit() -> None:
    rejected(lambda: cost_policy(cap_usd=1, tier_models={"lite": object()}), "tier_models.lite", "model name")


def test_tier_models_priced_listed_or_by_unpriced_are_accepted() -> None:
    listed = cost_policy(cap_usd=1, prices={"small": (0.1, 0.4)}, tier_models={"lite": model("small")})
    assert listed.priced("small")
    stated = cost_policy(cap_usd=1, unpriced=(5, 15), tier_models={"lite": model("small")})
    assert stated.price_of("small") == ModelPrice(input_per_mtok=5, output_per_mtok=15)
    no_limit = cost_policy(tier_models={"lite": model("small")})  # nothing to overspend
    assert not no_limit.priced("small")


def test_price_of_is_listed_then_unpriced_then_none() -> None:
    strict = cost_policy(prices={"a": (1, 2)})
    assert strict.unpriced == "error"
    assert strict.price_of("a") == ModelPrice(input_per_mtok=1, output_per_mtok=2)
    assert strict.price_of("a-typo") is None and not strict.priced("a-typo")
    lenient = cost_policy(prices={"a": (1, 2)}, unpriced=[10, 30, 1])
    assert lenient.price_of("a") == ModelPrice(input_per_mtok=1, output_per_mtok=2)
    assert lenient.price_of("router-pick") == ModelPrice(
        input_per_mtok=10, output_per_mtok=30, cached_input_per_mtok=1,
    )
    rejected(lambda: cost_policy(unpriced="free"), "unpriced")
    rejected(lambda: cost_policy(unpriced=(-1, 2)), "unpriced")


# --------------------------------------------------------- finish required


def test_require_finish_tool_without_a_finish_tool_is_refused() -> None:
    rejected(
        lambda: cfg(require_finish_tool=True, tools={"search": {"role": "retrieval"}}),
        "require_finish_tool", "finish",
    )


def test_require_finish_tool_with_a_finish_tool_is_accepted() -> None:
    config = cfg(require_finish_tool=True, tools={"submit": {"role": "finish"}})
    assert config.finish_required() and config.finish_tools() == ["submit"]
    assert not cfg(require_finish_tool=False).finish_required()
    assert not cfg().finish_required()


def test_require_finish_tool_reads_back_as_in_force() -> None:
    assert cfg(tools={"submit": {"role": "finish"}}).require_finish_tool is True
    assert cfg().require_finish_tool is False
    assert cfg(require_finish_tool=False, tools={"submit": {"role": "finish"}}).require_finish_tool is False


def test_the_small_values_take_their_fields_in_the_order_design_writes_them() -> None:
    from agentscope_harness import Ledger, ModelPrice, Prerequisite, Principal

    assert Prerequisite("lookup_order", ["order_id"]) == Prerequisite(tool="lookup_order", same_args=["order_id"])
    assert Prerequisite("lookup_order").same_args == []
    assert Ledger(8, 6) == Ledger(cap=8, soft_at=6)
    assert Ledger(8, on_exhausted="ask").on_exhausted == "ask"
    assert ModelPrice(0.15, 0.6) == ModelPrice(input_per_mtok=0.15, output_per_mtok=0.6)
    alice = Principal("u-42", "acme", {"search"}, region="eu")
    assert (alice.user_id, alice.tenant, alice.allowed_tools, alice.attr("region")) == (
        "u-42", "acme", frozenset({"search"}), "eu",
    )
    assert Principal("u-42") == Principal(user_id="u-42")
    with pytest.raises(TypeError, match="multiple values for argument 'cap'"):
        Ledger(8, cap=9)  # type: ignore[misc]
    rejected(lambda: Ledger(-1), "cap")


# -------------------------------------------------- NaN and inf everywhere


BASE: dict[type[BaseModel], dict[str, Any]] = {
    HarnessConfig: {},
    CostPolicy: {},
    Ledger: {"cap": 1},
    ModelPrice: {"input_per_mtok": 1.0, "output_per_mtok": 1.0},
    RateLimit: {"scope": "principal", "calls_per_min": 1},
    ConcurrencyLimit: {"scope": "principal", "max_in_flight": 1},
    ToolPolicy: {},
    Prerequisite: {"tool": "t"},
}


def _is_float(annotation: Any) -> bool:
    if annotation is float:
        return True
    return any(_is_float(arg) for arg in typing.get_args(annotation))


FLOAT_FIELDS = [
    (cls, name, info.annotation)
    for cls in BASE
    for name, info in cls.model_fields.items()
    if _is_float(info.annotation)
]


def test_float_fields_are_found() -> None:
    names = {(cls.__name__, name) for cls, name, _ in FLOAT_FIELDS}
    assert {("HarnessConfig", "deadline_s"), ("CostPolicy", "cap_usd"), ("CostPolicy", "tiers"),
            ("RateLimit", "wait_s"), ("ConcurrencyLimit", "lease_s")} <= names


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("cls", "name", "annotation"), FLOAT_FIELDS, ids=[f"{c.__name__}.{n}" for c, n, _ in FLOAT_FIELDS],
)
def test_nan_and_inf_are_refused_in_every_float_field(cls: type[BaseModel], name: str, annotation: Any, bad: float) -> None:
    value: Any = (0.5, bad, 0.05) if typing.get_origin(annotation) is tuple else bad
    rejected(lambda: cls.model_validate({**BASE[cls], name: value}), name)


# -------------------------------------------------------------- ToolPolicy


def test_tool_pii_names_the_bad_detector_or_mode() -> None:
    rejected(lambda: cfg(tools={"crm": {"pii": {"passport": "redact"}}}), "tools.crm.pii", "'passport'")
    rejected(lambda: cfg(tools={"crm": {"pii": {"email": "drop"}}}), "tools.crm.pii", "email", "'drop'")


def test_every_detector_and_mode_is_accepted() -> None:
    pii = {d: PII_MODES[i % len(PII_MODES)] for i, d in enumerate(PII_DETECTORS)}
    assert ToolPolicy(pii=pii).pii == pii
    assert set(PII_DETECTORS) == {"email", "phone", "card", "iban", "ssn", "ipv4", "ipv6"}
    assert set(PII_MODES) == {"redact", "mask", "hash", "block"}


def test_injection_mode_defaults_to_flag_for_retrieval_only() -> None:
    assert ToolPolicy(role="retrieval").injection == "flag"  # read back as in force
    assert ToolPolicy().injection == "off"
    assert ToolPolicy(role="retrieval").injection_mode() == "flag"
    assert ToolPolicy(role="lookup").injection_mode() == "off"
    assert ToolPolicy(role="retrieval", injection="off").injection_mode() == "off"
    assert ToolPolicy(role="other", injection="block").injection_mode() == "block"
    rejected(lambda: tool_policy(injection="warn"), "injection")


def test_ask_when_must_be_callable() -> None:
    def over_50(args: dict[str, Any]) -> str | None:
        return "refund over $50" if args.get("amount", 0) > 50 else None

    policy = ToolPolicy(role="mutation", ask_when=over_50)
    assert policy.ask_when is not None and policy.ask_when({"amount": 80}) == "refund over $50"
    rejected(lambda: tool_policy(ask_when="always"), "ask_when")


# -------------------------------------------------------- CostPolicy, Ledger


def test_on_exhausted_and_token_limits() -> None:
    cost = cost_policy(on_exhausted="ask", max_input_tokens=100_000, max_output_tokens=8_000,
                      max_request_input_tokens=32_000)
    assert (cost.on_exhausted, cost.max_request_input_tokens) == ("ask", 32_000)
    assert CostPolicy().on_exhausted == "stop" and CostPolicy().max_input_tokens is None
    rejected(lambda: cost_policy(on_exhausted="extend"), "on_exhausted")
    for name in ("max_input_tokens", "max_output_tokens", "max_request_input_tokens"):
        rejected(lambda name=name: cost_policy(**{name: 0}), name)
    assert Ledger(cap=2, soft_at=1, on_exhausted="ask").on_exhausted == "ask"
    assert Ledger(cap=2).on_exhausted == "stop"
    rejected(lambda: cfg(ledgers={"web": {"cap": 2, "on_exhausted": "wait"}}), "ledgers.web.on_exhausted")


# ---------------------------------------------------------- HarnessConfig


def test_answer_pii_is_validated() -> None:
    assert cfg(pii={"card": "mask", "email": "hash"}).pii == {"card": "mask", "email": "hash"}
    rejected(lambda: cfg(pii={"phone": "obfuscate"}), "pii", "phone", "'obfuscate'")
    rejected(lambda: cfg(pii={"name": "redact"}), "pii", "'name'")


def test_short_secret_values_are_refused_without_echoing_them() -> None:
    message = rejected(lambda: cfg(secret_values=["long-enough-1", "hunter2"]), "secret_values", "[1]")
    assert "hunter2" not in message and str(MIN_SECRET_CHARS) in message
    rejected(lambda: cfg(secret_values=[""]), "secret_values", "[0]")


def test_secret_values_stay_out_of_errors_and_repr() -> None:
    secret = "s3cr3t-value-0042"
    message = rejected(
        lambda: cfg(secret_values=[secret], tools={"s": {"ledgers": ["web"]}}), "tools.s.ledgers",
    )
    assert secret not in message
    config = cfg(secret_values=[secret])
    assert secret not in repr(config) and secret not in str(config)
    assert config.resolved_secret_values({}) == [secret]


def test_secret_env_resolves_set_variables_and_skips_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    config = cfg(secret_values=["exact-value-1"], secret_env=["SHOP_DB_PASSWORD", "UNSET_VAR", "DUP"])
    env = {"SHOP_DB_PASSWORD": "pa55word-long", "DUP": "exact-value-1"}
    assert config.resolved_secret_values(env) == ["exact-value-1", "pa55word-long"]
    assert config.resolved_secret_values({"SHOP_DB_PASSWORD": ""}) == ["exact-value-1"]
    monkeypatch.setenv("SHOP_DB_PASSWORD", "from-os-environ")
    assert "from-os-environ" in config.resolved_secret_values()


def test_a_short_secret_env_value_names_the_variable_not_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    config = cfg(secret_env=["SHOP_PIN"])
    with pytest.raises(HarnessConfigError) as info:
        config.resolved_secret_values({"SHOP_PIN": "1234"})
    assert "SHOP_PIN" in str(info.value) and "1234" not in str(info.value)
    monkeypatch.setenv("SHOP_PIN", "4321")
    message = rejected(lambda: cfg(secret_env=["SHOP_PIN"]), "secret_env", "SHOP_PIN")
    assert "4321" not in message


@pytest.mark.parametrize("name", ["", "A=B", " PADDED"])
def test_secret_env_names_must_be_variable_names(name: str) -> None:
    rejected(lambda: cfg(secret_env=["OK_NAME", name]), "secret_env", "[1]")


def test_disclose_budget_model_error_text_and_record_raw() -> None:
    config = HarnessConfig()
    assert (config.disclose_budget, config.model_error_text, config.record_raw) == ("changes", None, False)
    config = cfg(disclose_budget="every_call", model_error_text="The model is unavailable ({reason}).",
                 record_raw=True)
    assert config.model_error_text is not None
    assert config.model_error_text.format(reason="model_error") == "The model is unavailable (model_error)."
    rejected(lambda: cfg(disclose_budget="always"), "disclose_budget")


# ------------------------------------------------- RateLimit, ConcurrencyLimit


@pytest.mark.parametrize(
    ("kw", "fragments"),
    [
        ({"scope": "principal"}, ("calls_per_min or tokens_per_min",)),
        ({"scope": "tool", "calls_per_min": 5}, ("scope 'tool'", "`tool`")),
        ({"scope": "tool", "tool": "web", "tokens_per_min": 1000}, ("tokens_per_min", "'web'")),
        ({"scope": "tenant", "tool": "web", "calls_per_min": 5, "tokens_per_min": 10}, ("tokens_per_min",)),
        ({"scope": "tool", "tool": "", "calls_per_min": 5}, ("tool",)),
        ({"scope": "principal", "calls_per_min": 0}, ("calls_per_min",)),
        ({"scope": "principal", "calls_per_min": 5, "wait_s": -1}, ("wait_s",)),
        ({"scope": "session", "calls_per_min": 5}, ("scope",)),
    ],
)
def test_a_rate_limit_that_limits_nothing_is_refused(kw: dict[str, Any], fragments: tuple[str, ...]) -> None:
    rejected(lambda: cfg(rate_limits=[{"scope": "principal", "calls_per_min": 60}, kw]),
             "rate_limits.1", *fragments)


def test_rate_limits_that_limit_something_are_accepted() -> None:
    config = cfg(rate_limits=[
        RateLimit(scope="principal", calls_per_min=30, tokens_per_min=200_000, wait_s=2),
        {"scope": "tenant", "tokens_per_min": 1_000_000},
        {"scope": "tool", "tool": "web", "calls_per_min": 100},
        {"scope": "principal", "tool": "refund", "calls_per_min": 3},
    ])
    assert [r.scope for r in config.rate_limits] == ["principal", "tenant", "tool", "principal"]
    assert config.rate_limits[0].wait_s == 2 and config.rate_limits[1].wait_s == 0


def test_concurrency_limits_are_validated() -> None:
    config = cfg(concurrency_limits=[
        {"scope": "principal", "max_in_flight": 2},
        ConcurrencyLimit(scope="tool", tool="export", max_in_flight=4, lease_s=60),
    ])
    assert config.concurrency_limits[0].lease_s == 300 and config.concurrency_limits[1].tool == "export"
    rejected(lambda: cfg(concurrency_limits=[{"scope": "tool", "max_in_flight": 1}]),
             "concurrency_limits.0", "`tool`")
    rejected(lambda: cfg(concurrency_limits=[{"scope": "tenant", "max_in_flight": 0}]),
             "concurrency_limits.0.max_in_flight")
    rejected(lambda: cfg(concurrency_limits=[{"scope": "tenant", "max_in_flight": 1, "lease_s": 0}]),
             "concurrency_limits.0.lease_s")


class _StoreWithoutRenewal:
    """A store written against ``LedgerStore`` alone (no ``lease_renew``)."""

    def __init__(self) -> None:
        from agentscope_harness.stores import MemoryStore

        inner = MemoryStore()
        for name in ("get_spend", "add_spend", "reserve_spend", "settle_spend", "breaker_allow",
                     "breaker_record", "rate_acquire", "lease_acquire", "lease_release"):
            setattr(self, name, getattr(inner, name))


def test_concurrency_limits_need_a_store_that_renews_leases_and_nothing_else_does() -> None:
    rejected(lambda: cfg(store=_StoreWithoutRenewal(), concurrency_limits=[{"scope": "principal", "max_in_flight": 1}]),
             "lease_renew")
    config = cfg(store=_StoreWithoutRenewal(), rate_limits=[{"scope": "principal", "calls_per_min": 60}])
    assert Harness(config, load_entry_points=False).services.fleet.ledger  # still shared through the store


# ------------------------------------------------------ round trip and CLI


def full_config() -> HarnessConfig:
    return HarnessConfig(
        tools={
            "web": ToolPolicy(role="retrieval", ledgers=["web"], pii={"email": "hash"}, injection="block",
                              claims=[r"\bI searched\b"]),
            "refund": ToolPolicy(role="mutation", requires=[Prerequisite(tool="web", same_args=["q"])]),
            "submit": ToolPolicy(role="finish"),
        },
        ledgers={"web": Ledger(cap=3, soft_at=2, on_exhausted="ask")},
        cost=cost_policy(cap_usd=0.5, daily_quota_usd=5, prices={"big": (2.5, 10, 1.25)}, unpriced=(20, 80),
                        on_exhausted="ask", max_input_tokens=500_000, max_output_tokens=20_000,
                        max_request_input_tokens=64_000, fallback_text="Out of budget ({reason})."),
        deadline_s=60,
        require_finish_tool=True,
        redact_patterns=[r"ACME-\d{6}"],
        pii={"card": "mask", "iban": "block"},
        secret_values=["exact-value-1"],
        secret_env=["SHOP_DB_PASSWORD"],
        rate_limits=[RateLimit(scope="tool", tool="web", calls_per_min=10, wait_s=1.5)],
        concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=2)],
        disclose_budget="every_call",
        model_error_text="The model failed ({reason}).",
        record_raw=True,
    )


def test_json_and_yaml_round_trips_keep_every_field() -> None:
    config = full_config()
    dumped = config.model_dump(mode="json")
    assert dumped["cost"]["unpriced"] == {"input_per_mtok": 20.0, "output_per_mtok": 80.0,
                                          "cached_input_per_mtok": None}
    assert HarnessConfig.model_validate(json.loads(json.dumps(dumped))) == config
    assert HarnessConfig.model_validate(yaml.safe_load(yaml.safe_dump(dumped))) == config
    assert build_config(dumped) == config


def test_build_config_raises_harness_config_error_naming_the_field() -> None:
    with pytest.raises(HarnessConfigError, match="fallback_text"):
        build_config({"fallback_text": "Sorry {user}"})


def test_check_config_accepts_the_example_and_shows_the_new_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "--json", "examples/shop_policy.yaml"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is True
    assert data["config"]["cost"]["unpriced"] == "error"
    assert data["config"]["disclose_budget"] == "changes"
    assert data["config"]["ledgers"]["catalogue"]["on_exhausted"] == "stop"


def test_check_config_names_the_bad_field(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "cost:\n  cap_usd: 0.1\n  prices:\n    gpt-x: [1.0]\n"
        "fallback_text: 'Sorry {user}'\n"
        "rate_limits:\n  - {scope: tool, calls_per_min: 5}\n",
    )
    assert main(["check-config", str(policy)]) != 0
    err = capsys.readouterr().err
    assert "cost.prices.gpt-x" in err
    assert "fallback_text" in err and "{user}" in err
    assert "rate_limits.0" in err


# ------------------------------------------ configs that would silently disable a limit


@pytest.mark.parametrize("limit", [{"cap_usd": 0.5}, {"daily_quota_usd": 2.0}])
def test_a_zero_unpriced_price_under_a_money_limit_is_refused(limit: dict[str, float]) -> None:
    """Red team: ``unpriced=(0, 0)`` let a mistyped model name spend without
    limit (900k tokens against a $0.001 cap, charged $0)."""
    rejected(lambda: cost_policy(prices={"big": (2, 8)}, unpriced=(0, 0), **limit), "unpriced", "$0")
    assert cost_policy(prices={"big": (2, 8)}, unpriced=(0, 0)).priced("other")  # no limit to keep


def test_zero_units_on_a_ledger_tool_is_refused() -> None:
    """Red team: ``units=0`` on a tool that names a ledger never charged it:
    the ledger's cap was silently off."""
    rejected(lambda: cfg(tools={"search": ToolPolicy(ledgers=["q"], units=0)}, ledgers={"q": Ledger(cap=2)}),
             "units", "ledger")
    assert cfg(tools={"ping": ToolPolicy(units=0)}).tools["ping"].units == 0  # no ledger: nothing to charge


def test_check_config_never_prints_secret_values(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The effective config is printed (to a terminal, a CI log): its
    ``secret_values`` are shown as placeholders, their number kept."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("secret_values: ['hunter2-very-secret-value']\n")
    assert main(["check-config", "--json", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "hunter2-very-secret-value" not in out
    assert json.loads(out)["config"]["secret_values"] == ["<secret>"]

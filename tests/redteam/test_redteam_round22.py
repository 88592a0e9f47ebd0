"""Red team, round 22: attacks on round 21's fixes.

1. ``outputs._escape_at`` reading escapes as AgentScope's argument repair
   (json_repair) reads them, on the real streaming path (``ArgStream``);
2. ``redaction.StreamRedactor.feed`` appending through locals: a stream
   still redacts as ``Redactor.redact`` redacts the whole text, and a
   rejected delta;
3. ``claims`` walking the schema (``hooks.safety._structured_strings``,
   ``_alternatives``, ``_branch``): realistic pydantic schemas, and the
   cost of a large output.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Annotated, Literal, Union

import pytest
from agentscope._utils._common import _json_loads_with_repair
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model
from test_redteam_round21 import _search_with, _structured

from agentscope_harness import Harness, HarnessConfig, TerminalState
from agentscope_harness.hooks.safety import _structured_strings

# ====================================================== 1. escapes json_repair decodes

QUOTED = 'Tr0ub"dor-and-3-horses'  # an exact value with a double quote (a password)


@pytest.mark.parametrize("spelling", ['\\\\"', '\\\\\\\\"'], ids=["two-backslashes", "four-backslashes"])
async def test_an_exact_value_with_a_quote_spelled_with_a_backslash_run_never_streams(spelling: str) -> None:
    """README (Secrets): tool-call arguments are redacted "however the
    model spells a secret ... an exact value is also looked for as JSON
    spells it". ``'{"q": "Tr0ub\\\\"dor-and-3-horses"}'`` is not JSON
    (the string ends after ``\\\\``); AgentScope's ``_json_loads_with_repair``
    hands it (and any call, its tool having a schema) to json_repair, whose
    ``_normalize_escape_sequence`` folds a backslash run followed by the
    string's quote into the quote: the tool reads ``Tr0ub"dor-and-3-horses``.
    ``canonical_escapes`` reads ``\\\\`` as one escaped backslash, so the
    exact value's JSON spelling (``Tr0ub\\"dor…``) is not in the text and
    the stream shows the value one spelling away (with ``\\"`` it is
    redacted)."""
    raw = '{"q": "Tr0ub' + spelling + 'dor-and-3-horses"}'
    streamed, ran, report = await _search_with(raw, secret_values=[QUOTED])
    assert report.terminal_state is TerminalState.COMPLETED
    assert ran.of("search")[0]["q"] == QUOTED  # the tool reads the secret
    assert QUOTED not in str(_json_loads_with_repair(streamed)), streamed  # the stream, read as the tool reads


async def test_an_exact_value_with_a_quote_in_json_spelling_never_streams() -> None:
    """Regression guard (control of the above): ``\\"`` is redacted."""
    streamed, ran, _ = await _search_with('{"q": "Tr0ub\\"dor-and-3-horses"}', secret_values=[QUOTED])
    assert ran.of("search")[0]["q"] == QUOTED
    assert QUOTED not in str(_json_loads_with_repair(streamed)) and "Tr0ub" not in streamed, streamed


# ====================================================== 2. the stream redactor

VALUES = ["hunter2/very-secret-value", QUOTED]
SECRETS = [
    "sk-Abcdefghijklmnopqrstuvwxyz0123456789", "sk-ant-api03-" + "Abcdefghij" * 6, "sk_live_" + "a1B2c3D4e5" * 3,
    "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "ghp_" + "A1b2C3d4E5" * 4 + "ab12", "AIza" + "B" * 35, "xoxb-1234567890-abcdefghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmnopqrstuv",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789", "password=Tr0ub4dor-and-3xyz",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\nxyz\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz\n", '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    *VALUES,
]
PROSE = [" ", "hello ", "sk", "sk-", "AKIA", "eyJ", "-----BEGIN", "\n", "x", "password", "=", ":", "hunter2/",
         "Bearer ", "_", "Tr0ub", "ghp_", '"', "secret", "é"]
REDACTOR = Harness(HarnessConfig(secret_values=VALUES), load_entry_points=False).redactor


def _streamed(text: str, cuts: list[int]) -> str:
    stream, out, prev = REDACTOR.stream(), [], 0
    for cut in [*cuts, len(text)]:
        out.append(stream.feed(text[prev:cut]))
        prev = cut
    return "".join(out) + stream.flush()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SECRETS) | st.sampled_from(PROSE), min_size=1, max_size=10), st.data())
def test_a_stream_redacts_as_the_whole_text_is_redacted(parts: list[str], data: st.DataObject) -> None:
    """Regression guard: ``StreamRedactor`` "sends the rest redacted
    exactly as ``Redactor.redact`` would redact the whole text", whatever
    the cuts, after the append through locals (round 21)."""
    text = "".join(parts)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12))))
    assert _streamed(text, cuts) == REDACTOR.redact(text)


@pytest.mark.parametrize("secret", SECRETS, ids=range(len(SECRETS)))
def test_every_secret_cut_at_every_place_is_redacted(secret: str) -> None:
    """Regression guard: each built-in shape and exact value, in prose, cut
    once at every position and also a character a delta."""
    text = f"see {secret} ok"
    want = REDACTOR.redact(text)
    assert want != text
    for at in range(1, len(text)):
        assert _streamed(text, [at]) == want, at
    assert _streamed(text, list(range(1, len(text)))) == want


KEY = "sk-ant-api03-" + "Abcdefghij" * 6


def test_a_refused_delta_leaves_the_held_text_held() -> None:
    """``StreamRedactor.feed`` (round 21) moves ``_buf``/``_low`` into
    locals and sets them to ``""`` *before* ``buf += delta``: a delta that
    is not a str (a provider's bytes, an SDK object) raises there and the
    held text (an opening ``sk-ant-api03-…`` still undecided) is gone,
    while ``_off``/``_sent``/the live candidate still point into it. The
    caller goes on: the key's remaining 50 characters are sent as they
    are, and the held opening is lost (before, ``self._buf += delta``
    raised with nothing changed)."""
    stream = REDACTOR.stream()
    out = [stream.feed("hello " + KEY[:20])]
    with pytest.raises(TypeError):
        stream.feed(b"bytes")  # type: ignore[arg-type]
    out += [stream.feed(KEY[20:] + " and the rest of the answer"), stream.flush()]
    assert "".join(out) == REDACTOR.redact(f"hello {KEY} and the rest of the answer"), out


# ====================================================== 3. claims


def _strings(schema: object, value: object) -> tuple[list[str], float]:
    agent = SimpleNamespace(state=SimpleNamespace(reply_context=SimpleNamespace(
        structured_output=value, structured_schema=schema)))
    start = time.perf_counter()
    strings = _structured_strings(agent)
    return strings, time.perf_counter() - start


class Flags(BaseModel):
    cancelled: bool = False


def _event_log(kinds: int) -> type[BaseModel]:
    """An event log: ``kinds`` event models in a discriminated union, each
    with an optional ``Flags`` and a ``dict[str, list[Flags]]``."""
    models = [create_model(f"Ev{i}", kind=(Literal[f"k{i}"], ...),  # type: ignore[call-overload]
                           flags=(Flags | None, None), meta=(dict[str, list[Flags]], {}))
              for i in range(kinds)]
    union = Annotated[Union[tuple(models)], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007
    return create_model("EventLog", events=(list[union], ...))  # type: ignore[call-overload]


def test_claims_of_a_large_structured_output_do_not_block_the_loop() -> None:
    """The claims walk (round 21) calls ``_alternatives`` for every value:
    for each of 10,000 events of a 40-model discriminated union it follows
    40 ``$ref``s and copies and merges 40 shapes, then ``_branch`` tests
    every one (and again for each nested ``Optional[Flags]``). It runs in
    the ``final_answer_audit`` hook, on the event loop's thread, in one
    piece: ~2 s here, while the same output walked with a 2-branch union
    costs ~0.2 s. README: the loop gets a turn after every millisecond of
    redaction work; the claims check has no such steps."""
    log = _event_log(40)
    value = {"events": [{"kind": f"k{i % 40}", "flags": {"cancelled": False}, "meta": {"m": [{"cancelled": False}]}}
                        for i in range(10_000)]}
    strings, took = _strings(log, value)
    assert "cancelled" not in strings
    assert took < 1.5, took  # generous: 2 cores, other jobs (it was 2.3 s alone)


class Order(BaseModel):
    id: str
    status: Literal["open", "cancelled", "shipped"]
    flags: Flags | None = None


class Refund(BaseModel):
    id: str
    notes: dict[str, bool] = {}


class Orders(BaseModel):
    by_customer: dict[str, list[Order | Refund]]
    pick: Order | None = None


def test_declared_fields_in_optional_nested_and_union_models_are_no_claims() -> None:
    """Regression guard: ``Optional[Model]``, ``dict[str, list[Union[A,
    B]]]`` and a ``Literal`` status named like a discriminator: declared
    field names are not read as the model's words, a free mapping's keys
    are."""
    value = {"by_customer": {"c1": [{"id": "A-1", "status": "open", "flags": {"cancelled": False}},
                                    {"id": "R-1", "notes": {"refund cancelled by customer": True}}]},
             "pick": {"id": "A-2", "status": "shipped", "flags": None}}
    strings, _ = _strings(Orders, value)
    assert "cancelled" not in strings and "flags" not in strings and "status" not in strings
    assert "refund cancelled by customer" in strings


class Kebab(BaseModel):
    model_config = ConfigDict(alias_generator=lambda name: name.replace("_", "-"), serialize_by_alias=True,
                              populate_by_name=True)


class KebabOrder(Kebab):
    order_id: str
    order_cancelled: bool = False


class KebabStatus(Kebab):
    orders: list[KebabOrder]


async def test_a_declared_field_serialized_by_its_alias_is_no_claim() -> None:
    """``_structured_strings``: "each key its schema does not declare at
    that place" is a claim; AgentScope keeps ``model_dump(mode="json")``,
    which for a model configured ``serialize_by_alias=True`` (an API's
    kebab-case names) writes the aliases. The schema is read with
    ``by_alias=False``, so every key is undeclared, and ``{"orders":
    [{"order-id": "A-1", "order-cancelled": false}]}`` (not cancelled) is
    withheld as an unsupported claim of ``cancel_order``."""
    output = {"orders": [{"order-id": "A-1", "order-cancelled": False}]}
    final, report, _ = await _structured(KebabStatus, output)
    assert final.structured_output == output
    assert report.unsupported_claims == []

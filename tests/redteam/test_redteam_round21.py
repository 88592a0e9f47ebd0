"""Red team, round 21: attacks on round 20's fixes.

1. tool-call arguments redacted as whole text with every JSON escape in one
   spelling (``outputs.JsonEscapes`` / ``canonical_escapes``) and exact
   values also in their JSON spelling (``Harness.args_redactor``), on the
   real streaming path (the ``ArgStream`` model of rounds 19/20); what the
   tool reads is what AgentScope's ``_json_loads_with_repair`` (json.loads,
   else json_repair) makes of the model's text;
2. a value its key labels a secret (``outputs.cleaned_args`` / ``_labelled``);
3. ``claims`` walking the schema with the output (``hooks.safety.
   _structured_strings`` / ``_shape``);
4. cost of the streamed-arguments filter and of ``cleaned_args``.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real ``Toolkit``s, the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pytest
from agentscope._utils._common import _json_loads_with_repair
from hookkit import ArgStream, Ran, drive, searcher, shop_tools, streamed_args, structured_reply
from pydantic import BaseModel, Field
from scripted import ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from agentscope_harness.outputs import OutputFilter, canonical_escapes, cleaned_args

U1 = Principal(user_id="u1")
SECRET = "hunter2/very-secret-value"


# ====================================================== 1. tool-call arguments


Q_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def _read(shown: str) -> str:
    """What the stream shows, read as AgentScope reads the call's arguments
    (the reader of the stream decodes its escapes as the tool's parser does)."""
    try:
        return json.dumps(_json_loads_with_repair(shown), ensure_ascii=False)
    except Exception:  # display text that is no dict: read as written
        return shown


async def _search_with(raw_args: str, chunk: int = 3, **cfg: Any) -> tuple[str, Ran, Any]:
    """An ordinary ``search`` call with ``raw_args`` (streamed ``chunk``
    characters a delta): the streamed arguments, what the tool read, the report."""
    ran = Ran()
    h = Harness(HarnessConfig(**cfg), load_entry_points=False)
    model = ArgStream([calls(("search", raw_args)), text("done")], stream=True, chunk=chunk, model="m")
    agent = make_agent(model, [searcher(ran)], h.middlewares(), name="a")
    events, _, report = await drive(h, agent)
    return streamed_args(events), ran, report


KEY = "sk-Abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.mark.parametrize(("raw", "leak", "cfg"), [
    ('{"q": "hunter2\\x2fvery-secret-value"}', SECRET, {"secret_values": [SECRET]}),
    ('{"q": "' + KEY.replace("A", "\\x41") + '"}', KEY, {}),
    ('{"q": "Authorization: Bearer\\x20abcdefghijklmnopqrstuvwxyz0123456789"}',
     "abcdefghijklmnopqrstuvwxyz0123456789", {}),
    ('{"q": "password\\x3dTr0ub4dor-and-3xyz"}', "Tr0ub4dor-and-3xyz", {}),
], ids=["exact-value", "openai-key", "bearer", "password-assignment"])
async def test_a_secret_spelled_with_x_escapes_never_streams(raw: str, leak: str, cfg: dict) -> None:
    """README (Secrets): tool-call arguments are redacted "however the
    model spells a secret". AgentScope's ``_json_loads_with_repair`` hands a
    call whose JSON ``json.loads`` refuses to json_repair, which decodes
    ``\\xNN`` (``_normalize_escape_sequence``: ``u`` and ``x``): the tool
    receives the secret. ``canonical_escapes`` knows only JSON's escapes
    and keeps ``\\x2f`` as written, so neither the exact value nor a shape
    (``sk-``, ``Bearer``, ``password=``) is found, and the stream shows
    the secret one escape away from its characters."""
    streamed, ran, report = await _search_with(raw, **cfg)
    assert report.terminal_state is TerminalState.COMPLETED
    assert leak in ran.of("search")[0]["q"]  # the tool reads the secret: these are its arguments
    assert leak not in _read(streamed), streamed


@pytest.mark.parametrize("raw", [
    '{"q": "it\\\'s-my-vault-secret-2024"}',
    "{'q': 'it\\'s-my-vault-secret-2024'}",
], ids=["double-quoted", "single-quoted"])
async def test_an_exact_value_with_an_apostrophe_spelled_with_a_backslash_never_streams(raw: str) -> None:
    """README (Secrets): "an exact value is also looked for as JSON spells
    it". ``it's-my-vault-secret-2024`` configured; the model writes the
    apostrophe as ``\\'`` (invalid JSON, the Python/JS habit). json_repair
    reads ``\\'`` as ``'`` (a delimiter escaped that need not be): the tool
    receives the secret; ``canonical_escapes`` keeps ``\\'`` (a malformed
    escape "kept as it is") and the redactor never sees the value."""
    secret = "it's-my-vault-secret-2024"
    streamed, ran, report = await _search_with(raw, secret_values=[secret])
    assert report.terminal_state is TerminalState.COMPLETED
    assert ran.of("search")[0]["q"] == secret
    assert secret not in _read(streamed), streamed


async def test_pii_in_a_finishing_tools_arguments_spelled_with_an_x_escape_never_streams() -> None:
    """README (Secrets/Personal data): the finishing tool's arguments are
    its answer, streamed through ``HarnessConfig.pii``; the tool
    is the user's answer. ``john.doe\\x40example.com`` is invalid JSON;
    json_repair decodes ``\\x40`` to ``@``, so the answer the tool delivers
    holds the address, while the stream's PII step reads ``\\x40`` as
    written and shows it (a plain ``@`` is redacted: round 20's guard)."""
    delivered: list[str] = []

    async def finish(answer: str) -> str:
        """Deliver the final answer.

        Args:
            answer (str): The answer.
        """
        delivered.append(answer)
        return "delivered"

    finish.__name__ = "submit"
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, pii={"email": "redact"}),
                load_entry_points=False)
    raw = '{"answer": "write to john.doe\\x40example.com"}'
    model = ArgStream([calls(("submit", raw)), text("done")], stream=True, chunk=3, model="m")
    agent = make_agent(model, [finish, searcher(Ran())], h.middlewares(), name="a")
    events, _, report = await drive(h, agent, U1)
    assert report.terminal_state is TerminalState.COMPLETED
    assert delivered == ["write to john.doe@example.com"]  # the parsed answer holds the address
    assert "john.doe@example.com" not in _read(streamed_args(events)), streamed_args(events)


def _stream_through(raw: str, harness: Harness, chunk: int) -> str:
    stream = OutputFilter(harness.args_redactor, json_args=True).stream()
    return "".join(stream.feed(raw[i:i + chunk]) for i in range(0, len(raw), chunk)) + stream.flush()


EXACT = ['quo"te-secret-value', "back\\slash-secret", "ctl\x01\x1f-secret-value", "line\u2028sep-secret",
         "tab\tnew\nline-secret", "emoji\U0001f511-secret-value", "slash/secret/value/x", "del\x7f-secret-value"]


def _spellings(value: str) -> list[str]:
    r"""The JSON spellings of ``value`` a model may write: ASCII-escaped,
    raw, every character ``\uXXXX`` (lower and upper hex; astral ones as a
    surrogate pair), ``/`` as ``\/``."""
    def each(upper: bool) -> str:
        out = []
        for ch in value:
            units = [ord(ch)] if ord(ch) < 0x10000 else [0xD800 + ((ord(ch) - 0x10000) >> 10),
                                                        0xDC00 + ((ord(ch) - 0x10000) & 0x3FF)]
            out += [(f"\\u{u:04X}" if upper else f"\\u{u:04x}") for u in units]
        return '"' + "".join(out) + '"'
    return [json.dumps(value), json.dumps(value, ensure_ascii=False), each(False), each(True),
            json.dumps(value).replace("/", "\\/")]


def test_exact_values_in_every_json_spelling_never_stream() -> None:
    """Regression guard (README: "an exact value is also looked for as JSON
    spells it"; escapes "put in one spelling first"): values holding a
    quote, a backslash, control characters, U+2028, a tab and newline, an
    astral character, slashes, DEL, written in five spellings, the call
    ending right after the escaped value (no closing quote) and cut every
    1..11 characters (a surrogate pair split across deltas), never show a
    value the tool reads."""
    h = Harness(HarnessConfig(secret_values=EXACT), load_entry_points=False)
    for value in EXACT:
        for spelled in _spellings(value):
            for raw in ('{"q": ' + spelled + "}", '{"q": ' + spelled[:-1]):
                if _json_loads_with_repair(raw, Q_SCHEMA)["q"] != value:
                    continue  # json_repair reads an unclosed string's surrogate pair as two lone halves
                for chunk in (1, 2, 3, 5, 7, 11):
                    shown = _stream_through(raw, h, chunk)
                    assert value not in shown and value not in _read(shown), (raw, chunk, shown)


@pytest.mark.parametrize("raw", [
    '{"q": "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI\\/K7MDENG\\/bPxRfiCYEXAMPLEKEY"}',
    '{"q": "\\u0073k-abcdefghijklmnopqrstuvwxyz0123456789"}',
    '{"q": "eyJhbGciOiJIUzI1NiJ9\\u002eeyJzdWIiOiIxMjM0NTY3ODkwIn0\\u002eabcdefghijklmnop"}',
    '{"q": "-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEA7abcdef\\n-----END RSA PRIVATE KEY\\u002d----"}',
    '{"q": "Authorization: Bearer\\u0020abcdefghijklmnopqrstuvwxyz0123456789"}',
    '{"q": "gh\\u0070_abcdefghijklmnopqrstuvwxyz0123456789"}',
    '{"\\u0053ecretAccessKey": "wJalrXUtnFEMI\\/K7MDENG\\/bPxRfiCYEXAMPLEKEY"}',
], ids=["aws-pair", "openai", "jwt", "pem", "bearer", "github", "sts-label"])
async def test_built_in_shapes_written_with_json_escapes_never_stream(raw: str) -> None:
    """Regression guard: built-in shapes with a JSON escape inside them
    (``\\/`` in an AWS secret, ``\\u0073`` opening ``sk-``, ``\\u002e`` in
    a JWT, ``\\u0020`` after ``Bearer``, an escaped label) are redacted in
    the stream of a real call cut every 3 characters."""
    streamed, ran, report = await _search_with(raw)
    assert report.terminal_state is TerminalState.COMPLETED
    read = _read(streamed)
    for leak in ("wJalrXUtnFEMI/K7MDENG", "abcdefghijklmnopqrstuvwxyz0123456789", "MIIEowIBAAKCAQEA7",
                 "eyJzdWIiOiIxMjM0NTY3ODkwIn0"):
        assert leak not in read, streamed


# ====================================================== 2. labelled values


class Vault(BaseModel):
    note: str
    password: int


async def test_a_number_its_key_labels_a_secret_is_cleaned_in_a_structured_output() -> None:
    """CHANGELOG (round 20): "a value its key labels a secret ... is
    redacted in a finishing tool's arguments, a structured output and a
    report's principal"; ``cleaned_args(numbers=True)`` reads a number as
    its text. The streamed ``GenerateStructuredOutput`` arguments show
    ``"password": [redacted:…]`` (the text shape reads the digits), but
    ``_labelled`` pairs only a *string* value with its key (``not
    isinstance(value, str)``: returned as cleaned alone), so the delivered
    output carries the numeric password the stream hid."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    output = {"note": "vault rotated", "password": 918273645501}
    model = ArgStream([calls(("GenerateStructuredOutput", output)), text("x")], stream=True, chunk=5, model="m")
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    with h.acting_for(U1):
        events, final = await structured_reply(agent, Vault, "rotate the vault")
    assert "918273645501" not in streamed_args(events)  # the stream hid it
    assert "918273645501" not in json.dumps(final.structured_output), final.structured_output


# ====================================================== 3. claims


CANCEL_CLAIM = ToolPolicy(role="mutation", claims=[r"\bcancel+ed\b"])


async def _structured(schema: Any, output: dict) -> tuple[Any, Any, Ran]:
    """A structured reply of ``output`` under ``schema`` (``cancel_order``
    never called): the final Msg, the report, what ran."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, schema, "status of A-1?")
    return final, h.last_report(agent), ran


class Flags(BaseModel):
    cancelled: bool = False


class Checked(BaseModel):
    pair: tuple[Flags, str]


async def test_a_declared_field_inside_a_tuple_is_no_claim() -> None:
    """CHANGELOG (round 20): claims read "the keys a structured output's
    schema does not declare at that place ... the schema walked with the
    output". ``pair: tuple[Flags, str]`` is ``prefixItems`` in pydantic's
    schema; ``_shape`` reads only ``items``, so a tuple member's object is
    walked with ``{}`` and its declared ``cancelled`` is read as the
    model's words: ``{"pair": [{"cancelled": false}, "A-1"]}`` (not
    cancelled) is withheld as an unsupported claim."""
    output = {"pair": [{"cancelled": False}, "A-1"]}
    final, report, _ = await _structured(Checked, output)
    assert report.unsupported_claims == []
    assert final.structured_output == output


PATTERNED = {"type": "object", "properties": {"orders": {
    "type": "object",
    "patternProperties": {"^[A-Z]-[0-9]+$": {"type": "object", "properties": {"cancelled": {"type": "boolean"}}}},
}}, "required": ["orders"]}


async def test_a_declared_field_under_pattern_properties_is_no_claim() -> None:
    """As above, with a JSON-schema dict: ``orders`` maps ids matching a
    pattern to objects declaring ``cancelled``. ``_shape`` reads
    ``properties`` and ``additionalProperties`` only, so under an order id
    the declared ``cancelled`` is read as a claim: ``{"orders": {"A-1":
    {"cancelled": false}}}`` is withheld."""
    output = {"orders": {"A-1": {"cancelled": False}}}
    final, report, _ = await _structured(PATTERNED, output)
    assert report.unsupported_claims == []
    assert final.structured_output == output


class KindA(BaseModel):
    kind: Literal["a"]
    info: Flags


class KindB(BaseModel):
    kind: Literal["b"]
    info: dict[str, bool]


class Tagged(BaseModel):
    result: KindA | KindB = Field(discriminator="kind")


async def test_a_claim_in_a_union_branchs_free_mapping_is_withheld() -> None:
    """README: "a structured output's strings claim an action ... a
    structured output is withheld"; round 20 (guarded there) reads a
    free-form mapping's keys, ``{"done": {"cancelled": true}}``. With a
    discriminated union (``oneOf``) ``_shape`` merges every branch's
    ``properties`` (``properties.update``; the stack pops the last branch
    first, so the first branch's ``info`` wins): the ``b`` branch's
    free-form ``info`` is walked with ``a``'s ``Flags`` schema, where
    ``cancelled`` is declared. ``{"kind": "b", "info": {"cancelled": true}}``
    with ``cancel_order`` never called is delivered ``completed``."""
    output = {"result": {"kind": "b", "info": {"cancelled": True}}}
    final, report, ran = await _structured(Tagged, output)
    assert ran == []
    assert report.unsupported_claims == ["cancel_order"]
    assert final.structured_output != output


class Node(BaseModel):
    name: str
    flags: Flags = Flags()
    notes: dict[str, bool] = {}
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


async def test_a_self_referencing_model_is_walked_at_every_depth() -> None:
    """Regression guard: a model that refers to itself (``$ref`` to its
    own ``$defs`` entry) walked 30 levels deep: declared
    ``cancelled`` at every level is no claim; a free-form key claiming it
    at the bottom is."""
    def tree(depth: int, claim: bool) -> dict:
        node: dict = {"name": "leaf", "flags": {"cancelled": False}, "notes": {"order A-1 cancelled": True} if claim
                      else {"order A-1 shipped": True}, "children": []}
        for _ in range(depth):
            node = {"name": "n", "flags": {"cancelled": False}, "notes": {}, "children": [node]}
        return node

    final, report, _ = await _structured(Tree, {"root": tree(30, claim=False)})
    assert report.unsupported_claims == [] and final.structured_output is not None
    _, report, _ = await _structured(Tree, {"root": tree(30, claim=True)})
    assert report.unsupported_claims == ["cancel_order"]


def _event_union(kinds: int) -> type[BaseModel]:
    """``kinds`` event models in a discriminated union; the first declares
    ``cancelled``."""
    from pydantic import create_model

    models = [create_model(f"Event{i}", kind=(Literal[f"k{i}"], ...),  # type: ignore[call-overload]
                           **({"cancelled": (bool, False)} if i == 0 else {f"field{i}": (str, "")}))
              for i in range(kinds)]
    union = models[0]
    for model in models[1:]:
        union = union | model  # type: ignore[assignment]
    return create_model("Log", event=(union, Field(discriminator="kind")))  # type: ignore[call-overload]


async def test_a_declared_field_of_a_wide_union_is_no_claim() -> None:
    """``_shape`` stops after 64 schema nodes (``seen < 64``: meant for a
    schema that refers to itself); a discriminated union of 40 event models
    is 81 nodes (the ``oneOf``, a ``$ref`` and a definition a branch), and
    the branches popped last, the first listed, are never merged: ``Event0``'s
    declared ``cancelled`` is read as the model's words and ``{"event":
    {"kind": "k0", "cancelled": false}}`` is withheld."""
    output = {"event": {"kind": "k0", "cancelled": False}}
    final, report, _ = await _structured(_event_union(40), output)
    assert report.unsupported_claims == []
    assert final.structured_output == output


# ====================================================== 4. cost


def _feed_times(raw: str, chunk: int) -> tuple[list[float], str]:
    """Each ``feed``'s time through the filter of ordinary calls' arguments,
    and the shown text."""
    h = Harness(HarnessConfig(secret_values=[SECRET]), load_entry_points=False)
    stream = OutputFilter(h.args_redactor, json_args=True).stream()
    times, out = [], []
    for i in range(0, len(raw), chunk):
        start = time.perf_counter()
        out.append(stream.feed(raw[i:i + chunk]))
        times.append(time.perf_counter() - start)
    out.append(stream.flush())
    return times, "".join(out)


def test_a_long_held_argument_costs_the_same_per_delta_at_its_end_as_at_its_start() -> None:
    """README (Secrets): "Redaction is linear in the input"; the
    ``StreamRedactor`` docstring: "feeding costs what the text costs". A
    1 MB argument that opens like a secret and goes on (``eyJ`` + a long
    base64url run: a base64url JSON payload; ``sk-…``) is held back whole
    while it may still become one, and every delta appends to the held
    buffer with ``self._buf += delta`` / ``self._low += …`` (an attribute:
    a copy of the whole held text per delta). In 16-character deltas a
    delta at the end costs ~15x one at the start (1 MB: ~4.5 s of CPU
    against ~0.8 s for the same size of prose; 4 MB would be ~16x that)."""
    times, shown = _feed_times('{"payload": "eyJ' + "a" * 1_000_000 + '"}', 16)
    early = sorted(times[1000:3000])[1000]
    late = sorted(times[-2000:])[1000]
    assert late < 4 * early + 5e-6, (early, late)


@pytest.mark.parametrize("kind", ["prose", "escapes", "digits", "backslashes"])
def test_a_megabyte_of_arguments_streams_progressively_in_linear_time(kind: str) -> None:
    """Regression guard: 1 MB of arguments with nothing that could become a
    secret (prose, ``\\u00e9`` escapes, a bare number, ``\\\\`` runs) in
    16-character deltas: shown as it comes (all but the last few KB before
    the call ends) and in time linear in its length (~1 s here; generous
    bound: 2 cores, other jobs)."""
    n = 1_000_000
    body = {"prose": '"' + "lorem ipsum dolor sit amet " * (n // 27) + '"', "escapes": '"' + "\\u00e9" * (n // 6) + '"',
            "digits": "7" * n, "backslashes": '"' + "\\\\" * (n // 2) + '"'}[kind]
    raw = '{"a": ' + body + "}"
    h = Harness(HarnessConfig(secret_values=[SECRET]), load_entry_points=False)
    stream = OutputFilter(h.args_redactor, json_args=True).stream()
    start, before_end = time.perf_counter(), 0
    for i in range(0, len(raw), 16):
        before_end += len(stream.feed(raw[i:i + 16]))
    stream.flush()
    elapsed = time.perf_counter() - start
    assert elapsed < 10, elapsed
    assert before_end > len(canonical_escapes(raw)[0]) - 4096, (before_end, len(raw))


def test_cleaning_a_large_structured_output_stays_linear() -> None:
    """Regression guard: ``cleaned_args`` (each string value also redacted
    as ``"key": "value"`` by ``_labelled``) on a structured output of
    20,000 fields costs time linear in it (~1 s here, ~4x the values alone;
    generous bound) and keeps every ordinary value."""
    h = Harness(HarnessConfig(secret_values=[SECRET], pii={"email": "redact"}), load_entry_points=False)
    small = {f"field_{i}": f"value {i} lorem ipsum" for i in range(2_000)}
    large = {f"field_{i}": f"value {i} lorem ipsum" for i in range(20_000)}
    start = time.perf_counter()
    assert cleaned_args(small, h.services.scrubbed, numbers=True) == small
    t_small = time.perf_counter() - start
    start = time.perf_counter()
    assert cleaned_args(large, h.services.scrubbed, numbers=True) == large
    t_large = time.perf_counter() - start
    assert t_large < 30 * t_small + 1.0 and t_large < 15, (t_small, t_large)

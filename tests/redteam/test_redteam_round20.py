"""Red team, round 20: attacks on round 19's fixes.

1. tool-call arguments filtered value by value as they stream
   (``outputs.JsonArgsStream``), on the real streaming path of a finishing
   tool and of an ordinary call, the arguments sent a few characters a delta
   (the ``ArgStream`` model of round 19); what the tool reads is what
   AgentScope's ``_json_loads_with_repair`` makes of the model's text;
2. ``claims`` reading the keys a structured output's schema does not
   declare (``hooks.safety._structured_strings`` / ``_field_names``).

Every attack broke round 19's value-by-value filter (``JsonArgsStream``,
named in the docstrings below); it was replaced by redacting the whole text
with its escapes in one spelling (``outputs.JsonEscapes``), and each test now
guards that. A test marked ``xfail(strict=True)`` is an attack that succeeds
today (the promise named in its reason is broken).
Real ``Agent``s, real ``Toolkit``s, the scripted model of ``tests/scripted.py``
and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from agentscope.event import ToolCallDeltaEvent, ToolCallEndEvent
from hookkit import ArgStream, Ran, drive, searcher, shop_tools, streamed_args, structured_reply, submit
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from scripted import ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from agentscope_harness.outputs import OutputFilter, pii_modes
from agentscope_harness.redaction import Redactor

U1 = Principal(user_id="u1")


# ====================================================== 1. tool-call arguments


async def _search_with(raw_args: str, secrets: list[str], chunk: int = 3, **cfg: Any) -> tuple[str, Ran, Any]:
    """An ordinary ``search`` call with ``raw_args`` (the model's text,
    streamed ``chunk`` characters a delta): the streamed arguments, what the
    tool read, the report."""
    ran = Ran()
    h = Harness(HarnessConfig(secret_values=secrets, **cfg), load_entry_points=False)
    model = ArgStream([calls(("search", raw_args)), text("done")], stream=True, chunk=chunk, model="m")
    agent = make_agent(model, [searcher(ran)], h.middlewares(), name="a")
    events, _, report = await drive(h, agent)
    return streamed_args(events), ran, report


async def _finish_with(raw_args: str, secrets: list[str], chunk: int = 3, tools: list[Any] | None = None,
                       **cfg: Any) -> tuple[list[Any], Any, Any]:
    """A run whose finishing tool ``submit`` is called with ``raw_args``:
    the events, the final Msg and the report."""
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, secret_values=secrets, **cfg),
                load_entry_points=False)
    model = ArgStream([calls(("submit", raw_args)), text("done")], stream=True, chunk=chunk, model="m")
    agent = make_agent(model, tools or [submit, searcher(Ran())], h.middlewares(), name="a")
    events, final, report = await drive(h, agent, U1)
    return events, final, report


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize("raw", [
    json.dumps({"q": "rotate", "creds": {"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": AWS_SECRET}}),
    json.dumps({"q": "rotate", "aws_secret_access_key": AWS_SECRET}),
], ids=["sts-SecretAccessKey", "aws_secret_access_key"])
async def test_an_aws_secret_key_in_its_json_spelling_is_redacted_in_streamed_arguments(raw: str) -> None:
    """README (Secrets): "Built-in key shapes (... AWS key ids and secret
    keys in ini/env/JSON spellings ...) are redacted in ... tool-call
    arguments". The JSON spelling is a key and its value
    (``"SecretAccessKey": "wJalr…"``, as in ``tests/reliability/
    test_redaction_attack.py``; STS's own output). Round 19 redacts each
    JSON string on its own (``JsonArgsStream._inside``): the key string
    holds the label, the value string the key, and neither matches the
    shape; round 18 redacted the whole text and caught it."""
    async def search(q: str, creds: dict | None = None, aws_secret_access_key: str = "") -> str:
        """Search.

        Args:
            q (str): The query.
            creds (dict): Credentials.
            aws_secret_access_key (str): A key.
        """
        return "ok"

    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ArgStream([calls(("search", raw)), text("done")], stream=True, chunk=7, model="m")
    agent = make_agent(model, [search], h.middlewares(), name="a")
    events, _, report = await drive(h, agent)
    streamed = streamed_args(events)
    assert report.terminal_state is TerminalState.COMPLETED
    assert AWS_SECRET not in streamed, streamed


PASSPHRASE = "correct horse battery staple"
BEARER = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7abcdefghijkl0123456789\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(("raw", "leak"), [
    ("{'q': 'the vault passphrase is correct horse battery staple'}", PASSPHRASE),
    ("{'q': 'Authorization: " + BEARER + "'}", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("{'q': '" + PEM.replace("\n", "\\n") + "'}", "MIIEowIBAAKCAQEA7"),
], ids=["passphrase", "bearer", "pem"])
async def test_single_quoted_arguments_the_tool_reads_never_stream_a_secret(raw: str, leak: str) -> None:
    """README (Secrets): tool-call arguments are redacted "value by value,
    as the tool reads them". AgentScope reads a call's arguments with
    ``_json_loads_with_repair`` (json_repair), which reads single-quoted
    strings as strings: the ``search`` tool receives the secret. The
    lexer (``JsonArgsStream._between``) sees no string at all, only bare
    tokens cut at every space and colon (``_BARE``), each redacted alone:
    an exact value with a space, a bearer token, a PEM key are shown whole.
    Round 18 redacted the whole text (all three caught)."""
    streamed, ran, report = await _search_with(raw, [PASSPHRASE])
    assert report.terminal_state is TerminalState.COMPLETED
    assert leak in ran.of("search")[0]["q"]  # the tool reads the secret: these are its arguments
    assert leak not in streamed, streamed


async def test_an_unescaped_quote_inside_a_string_does_not_split_a_secret_out_of_redaction() -> None:
    """README (Secrets): tool-call arguments "as the tool reads them".
    ``{"q": "the password is Tr0ub4dor"&3xyz"}``: json_repair reads one
    string, ``the password is Tr0ub4dor"&3xyz"`` (the tool receives the
    secret); the lexer closes the string at the inner quote, reads ``&3xyz``
    as a bare token and opens a new string never closed, so neither part
    holds the secret and the stream shows it. Round 18's whole-text
    redaction caught it (an exact value as written)."""
    secret = 'Tr0ub4dor"&3xyz'
    streamed, ran, report = await _search_with('{"q": "the password is Tr0ub4dor"&3xyz"}', [secret])
    assert report.terminal_state is TerminalState.COMPLETED
    assert secret in ran.of("search")[0]["q"]
    assert secret not in streamed, streamed


def _time_stream(text: str, chunk: int) -> float:
    stream = OutputFilter(Redactor(secret_values=["hunter2/very-secret-value"]), json_args=True).stream()
    start = time.perf_counter()
    for i in range(0, len(text), chunk):
        stream.feed(text[i:i + chunk])
    stream.flush()
    return time.perf_counter() - start


def test_a_long_bare_value_in_streamed_arguments_costs_what_its_text_costs() -> None:
    """README (Secrets): "Redaction is linear in the input"; "A stream
    holds back only what could still become a secret". A bare value at
    the end of a delta is held whole (``JsonArgsStream._between``:
    ``self._held = bare.group()``) and re-joined and re-matched with the
    next delta (``text = self._held + delta``; ``_BARE.match``): 200,000
    digits at 64 characters a delta take ~2.5 s (1 MB: about a minute of
    a blocked loop), against ~0.05 s for the same text as a string. The
    filter is the one ``_Shown`` builds for every ``ToolCallDeltaEvent``."""
    n = 200_000
    as_string = _time_stream('{"a": "' + "7" * n + '"}', 64)
    bare = _time_stream('{"a": ' + "7" * n + "}", 64)
    assert bare < 10 * as_string + 0.5, (bare, as_string)


def test_escapes_and_one_character_deltas_stay_linear() -> None:
    """Regression guard: a string of 60,000 ``\\u0061`` escapes (each fed
    to the redactor on its own) and 200 KB of prose streamed one
    character a delta cost time linear in their length (generous bounds:
    2 cores, other jobs; today ~1 s and ~2.5 s)."""
    escapes = _time_stream('{"a": "sk-' + "\\u0061" * 60_000 + '"}', 64)
    assert escapes < 8, escapes
    prose = _time_stream('{"a": "' + "word " * 40_000 + '"}', 1)
    assert prose < 15, prose


async def test_ordinary_arguments_stream_progressively_with_the_same_value() -> None:
    """Regression guard: valid JSON of a normal call (unicode, escapes,
    numbers, nesting) streams its value as it comes (most of the string is
    shown before the call ends, not at its end) and the shown JSON is the
    value the tool reads."""
    value = {"q": "caf\u00e9 \"quoted\" line\nnext " + "lorem ipsum dolor " * 40, "n": [1, 2.5, -3e2, True, None],
             "o": {"k": "v/w"}}
    raw = json.dumps(value)  # ensure_ascii: \u00e9, \", \n

    async def search(q: str, n: list | None = None, o: dict | None = None) -> str:
        """Search.

        Args:
            q (str): The query.
            n (list): Numbers.
            o (dict): More.
        """
        return "ok"

    h = Harness(HarnessConfig(secret_values=["hunter2/very-secret-value"]), load_entry_points=False)
    model = ArgStream([calls(("search", raw)), text("done")], stream=True, chunk=4, model="m")
    agent = make_agent(model, [search], h.middlewares(), name="a")
    events, _, report = await drive(h, agent)
    assert report.terminal_state is TerminalState.COMPLETED
    deltas = [e for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert json.loads("".join(e.delta for e in deltas)) == value
    end = next(i for i, e in enumerate(events) if isinstance(e, ToolCallEndEvent))
    before_end = [e for e in deltas if events.index(e) < end - 1]
    assert len(before_end) > len(raw) // 8 and sum(len(e.delta) for e in before_end) > len(raw) * 0.8


async def test_pii_in_a_finishing_tools_streamed_arguments_keys_values_and_numbers() -> None:
    """Regression guard (README: ``HarnessConfig.pii`` applies to the
    stream): an email in a key and split across deltas in a value, a card
    written as a JSON number (``mask``), an SSN in ``block`` mode, one
    character a delta; the streamed arguments show none of them."""
    async def pay(answer: str, card: int = 0, contacts: dict | None = None) -> str:
        """Deliver the final answer.

        Args:
            answer (str): The answer.
            card (int): A card.
            contacts (dict): Contacts.
        """
        return "delivered"

    pay.__name__ = "submit"
    raw = json.dumps({"answer": "write to john.doe@example.com, ssn 123-45-6789", "card": 4111111111111111,
                      "contacts": {"jane.roe@example.org": "friend"}})
    events, _, report = await _finish_with(
        raw, [], chunk=1, tools=[pay], pii={"email": "redact", "card": "mask", "ssn": "block"})
    shown = streamed_args(events)
    assert "john.doe" not in shown and "jane.roe" not in shown and "123-45-6789" not in shown
    assert "4111111111111111" not in shown and "************1111" in shown, shown


_META = st.sampled_from(['"', "\\", "u", "d83d", "\\ud83d", "\\udc00", "\\u00", "{", "}", "[", "]", ":", ",",
                         " ", "\x00", "\ud800", "\udfff", "7", "e", "'", "hunter2/very-secret-value", "x"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_META, max_size=30), st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_malformed_argument_text_never_raises_out_of_the_filter(pieces: list[str], cuts: list[int]) -> None:
    """Regression guard: any text (unbalanced quotes, a quote inside a bare
    token, backslashes outside strings, strings never closed, a stream cut
    right after a high-surrogate escape, NUL, lone surrogates), cut
    anywhere, goes through the args filter (with ``pii``) without an
    exception (one would break the reply); an exact secret written whole
    as a value is never shown."""
    raw = "".join(pieces)
    stream = OutputFilter(Redactor(secret_values=["hunter2/very-secret-value"]),
                          pii_modes({"email": "redact", "card": "mask"}), b"s", json_args=True).stream()
    out, at, i = [], 0, 0
    while at < len(raw):
        size = cuts[i % len(cuts)]
        out.append(stream.feed(raw[at:at + size]))
        at, i = at + size, i + 1
    shown = "".join(out) + stream.flush()
    assert isinstance(shown, str) and "hunter2/very-secret-value" not in shown


# ====================================================== 2. claims


CANCEL_CLAIM = ToolPolicy(role="mutation", claims=[r"\bcancel+ed\b"])


class CancelCheck(BaseModel):
    order_id: str
    cancelled: bool = Field(alias="isCancelled")


async def test_an_aliased_field_name_is_no_claim() -> None:
    """README: a structured output's *strings* claim an action; CHANGELOG
    (round 19): "a declared field's name is the schema's". ``_field_names``
    reads ``model_json_schema()`` (the aliases: ``isCancelled``) while
    AgentScope stores ``validated.model_dump(mode="json")`` (the field
    names: ``cancelled``), so every aliased field's name is read as the
    model's words. ``{"order_id": "A-1", "isCancelled": false}`` (the order
    is *not* cancelled; nothing claimed) is withheld as an unsupported
    claim and the run ends ``incomplete``. Round 18 skipped keys."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    output = {"order_id": "A-1", "isCancelled": False}
    model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, CancelCheck, "is A-1 cancelled?")
    report = h.last_report(agent)
    assert report.unsupported_claims == []
    assert final.structured_output == {"order_id": "A-1", "cancelled": False}


class Flags(BaseModel):
    cancelled: bool = False


class Progress(BaseModel):
    flags: Flags
    done: dict[str, bool]


async def test_a_claim_in_a_mapping_key_named_like_another_models_field_is_withheld() -> None:
    """README: "the answer (its text, or a structured output's strings)
    claims an action whose tool never succeeded ... a structured output is
    withheld"; round 19 reads a free-form mapping's keys. ``_field_names``
    collects property names from the whole schema, any depth, any model:
    ``done: dict[str, bool]`` with the key ``cancelled`` (``Flags`` in
    ``$defs`` declares a ``cancelled`` field) is skipped wherever it
    appears. ``{"done": {"cancelled": true}}`` with ``cancel_order`` never
    called is delivered ``completed``."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    output = {"flags": {"cancelled": False}, "done": {"cancelled": True}}
    model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, Progress, "cancel A-1")
    report = h.last_report(agent)
    assert ran == []
    assert report.unsupported_claims == ["cancel_order"]
    assert final.structured_output != output


async def test_a_json_schema_mapping_key_claim_is_withheld_and_declared_names_are_not() -> None:
    """Regression guard: with a JSON-schema dict (``additionalProperties``)
    a mapping's key claiming the action is read; a declared field's name
    (``cancelled_count``, a number beside it) is not."""
    schema = {"type": "object", "properties": {
        "cancelled_count": {"type": "integer"},
        "done": {"type": "object", "additionalProperties": {"type": "boolean"}},
    }, "required": ["done"]}
    for output, claimed in (({"cancelled_count": 0, "done": {"order A-1 cancelled": True}}, True),
                            ({"cancelled_count": 0, "done": {"order A-1 shipped": True}}, False)):
        ran = Ran()
        h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[r"cancel+ed"])}),
                    load_entry_points=False)
        model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
        agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
        with h.acting_for(U1):
            _, final = await structured_reply(agent, schema, "status?")
        report = h.last_report(agent)
        assert (report.unsupported_claims == ["cancel_order"]) is claimed, output
        assert (final.structured_output == output) is not claimed


class StsCreds(BaseModel):
    AccessKeyId: str
    SecretAccessKey: str


async def test_an_aws_secret_key_in_a_structured_outputs_json_spelling_is_redacted() -> None:
    """README (Secrets): built-in shapes ("AWS ... secret keys in
    ini/env/JSON spellings") are redacted in "the final answer and its
    structured output" and in tool-call arguments. A structured output
    whose fields are STS's own names is that JSON spelling; the streamed
    ``GenerateStructuredOutput`` arguments (``JsonArgsStream``, value by
    value) and the delivered output (``cleaned_args``, string by string)
    both carry the secret key."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    output = {"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": AWS_SECRET}
    model = ArgStream([calls(("GenerateStructuredOutput", output)), text("x")], stream=True, chunk=5, model="m")
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    with h.acting_for(U1):
        events, final = await structured_reply(agent, StsCreds, "creds?")
    streamed = streamed_args(events)
    assert "AKIAIOSFODNN7EXAMPLE" not in streamed  # the key id alone is a shape: redacted
    assert AWS_SECRET not in streamed, streamed
    assert AWS_SECRET not in json.dumps(final.structured_output), final.structured_output

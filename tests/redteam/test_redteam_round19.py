"""Red team, round 19: attacks on round 18's fixes.

1. tool-call arguments redacted "as the tool reads them" (``outputs.JsonEscapes``,
   ``Harness.args_redactor``), on the real streaming path of a finishing tool
   and of an ordinary tool call, arguments streamed in pieces;
2. ``claims`` reading a structured output's values, not its field names;
3. ``max_model_calls``: retries checked before they are made (``_OutOfCalls``),
   narrowed structured rounds only for a run's own cap (``narrowed_round``).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards of
the fixes. Real ``Agent``s, real ``Toolkit``s, the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hookkit import (
    ArgStream,
    Ran,
    drive,
    searcher,
    shop_tools,
    streamed_args,
    structured_delegate,
    structured_reply,
    submit,
)
from pydantic import BaseModel
from scripted import ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy

U1 = Principal(user_id="u1")


# ====================================================== 1. tool-call arguments


async def _finish_with(raw_args: str, secrets: list[str], chunk: int = 1, **cfg: Any) -> tuple[str, Any, Any]:
    """A run whose finishing tool ``submit`` is called with ``raw_args``
    (the model's JSON, streamed ``chunk`` characters a delta): the streamed
    arguments, the final Msg and the report."""
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, secret_values=secrets, **cfg),
                load_entry_points=False)
    model = ArgStream([calls(("submit", raw_args)), text("done")], stream=True, chunk=chunk, model="m")
    agent = make_agent(model, [submit, searcher(Ran())], h.middlewares(), name="a")
    events, final, report = await drive(h, agent)
    return streamed_args(events), final, report


QUOTED = 'Tr0ub4dor"&3xyz'
BACKSLASHED = "C:\\vault\\pw-9f3k2q"


@pytest.mark.parametrize(("secret", "raw"), [
    (QUOTED, '{"answer": "the password is Tr0ub4dor\\u0022&3xyz"}'),
    (BACKSLASHED, '{"answer": "the password is C:\\u005cvault\\u005Cpw-9f3k2q"}'),
], ids=["quote-u0022", "backslash-u005c"])
async def test_a_secret_whose_quote_is_spelled_as_a_unicode_escape_is_redacted_in_streamed_arguments(
    secret: str, raw: str,
) -> None:
    """README (Secrets): tool-call arguments are redacted "as the tool reads
    them: a secret the model spells with JSON escapes, `\\u0061` or `\\"`, is
    found". ``\\u0022`` is the JSON escape of a quote as much as ``\\"``:
    ``outputs.unescaped`` keeps ``\\u0022``/``\\u005c`` as written (to keep
    the JSON whole) and ``Harness.args_redactor`` knows only the ``\\"`` /
    ``\\\\`` spelling (``json.dumps``), so the streamed arguments decode to
    the secret; the answer itself is redacted."""
    assert json.loads(raw)["answer"].endswith(secret)
    streamed, final, report = await _finish_with(raw, [secret])
    assert report.terminal_state is TerminalState.COMPLETED
    assert "[redacted:" in final.get_text_content()
    assert secret not in json.loads(streamed)["answer"], streamed


PEM_LIKE = "line-one-s3cret\nline-two-s3cret"
KEYED = "\U0001f511vault-master-s3cret"


@pytest.mark.parametrize(("secret", "raw"), [
    (PEM_LIKE, '{"q": "line-one-s3cret\\u000Aline-two-s3cret"}'),
    (KEYED, json.dumps({"q": KEYED})),  # json.dumps's default (ensure_ascii): a surrogate pair
], ids=["newline-u000A", "non-bmp-surrogates"])
async def test_an_ordinary_tool_calls_streamed_arguments_never_carry_an_escaped_secret(secret: str, raw: str) -> None:
    """README: streamed "tool-call arguments (as the tool reads them ...)".
    A multi-line secret value written with ``\\u000A`` (any control
    character: ``unescaped`` keeps ``code < 0x20`` escaped, and the escaped
    spelling ``args_redactor`` knows is ``\\n``), or a secret with a
    character outside the BMP written as JSON's default ``ensure_ascii``
    writes it (``\\ud83d\\udd11``: surrogate halves are kept escaped), is
    shown whole in a ``search`` call's ``ToolCallDeltaEvent``s."""
    assert json.loads(raw)["q"] == secret
    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[secret]), load_entry_points=False)
    model = ArgStream([calls(("search", raw)), text("done")], stream=True, chunk=3, model="m")
    agent = make_agent(model, [searcher(ran)], h.middlewares(), name="a")
    events, _, report = await drive(h, agent)
    assert report.terminal_state is TerminalState.COMPLETED and ran.of("search") == [{"q": secret}]
    assert secret not in json.loads(streamed_args(events))["q"]


@pytest.mark.xfail(strict=True, reason="README limit: the streamed arguments are display text; a redaction "
                   "can cut through their JSON (a key block with no END line runs to the call's end; a secret "
                   "number becomes a bare marker); the tool and the final message get values cleaned one by one")
@pytest.mark.parametrize(("raw", "cfg"), [
    ('{"answer": "use -----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEA7abcdefghijkl0123456789"}', {}),
    ('{"answer": "your pin is below", "pin": 73019284615}', {"pin": True}),
], ids=["endless-pem", "secret-number"])
async def test_a_finishing_tools_streamed_arguments_stay_valid_json(raw: str, cfg: dict) -> None:
    """README: "the streamed JSON then carries those characters written
    out, the same value"; "What a streaming UI shows tells the same story".
    The args filter redacts the JSON *text*: an END-less PEM key (a
    built-in shape) runs to the end of the text and takes the value's
    closing ``"}`` with it; a secret value the model writes as a JSON
    number becomes a bare ``[redacted:secret_value]``. Either way the
    streamed arguments are no longer JSON (a UI that parses them fails).
    The tool itself gets parsed arguments (``cleaned_args``: the key's
    string redacted; the number as it is, its type being ``int``)."""
    if cfg.get("pin"):
        async def pin_submit(answer: str, pin: int = 0) -> str:
            """Deliver the final answer.

            Args:
                answer (str): The answer.
                pin (int): A number to deliver.
            """
            return "delivered"

        pin_submit.__name__ = "submit"
        h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, secret_values=["73019284615"]),
                    load_entry_points=False)
        model = ArgStream([calls(("submit", raw)), text("done")], stream=True, chunk=4, model="m")
        agent = make_agent(model, [pin_submit], h.middlewares(), name="a")
        events, _, report = await drive(h, agent)
        streamed = streamed_args(events)
    else:
        streamed, _, report = await _finish_with(raw, [], chunk=4)
    assert report.terminal_state is TerminalState.COMPLETED
    assert "[redacted:" in streamed
    json.loads(streamed)


@pytest.mark.parametrize("chunk", [1, 2, 5])
async def test_printable_escapes_cut_at_every_delta_boundary_are_redacted_and_keep_the_value(chunk: int) -> None:
    """Regression guard of ``JsonEscapes``: a key shape and an exact value
    spelled with ``\\u0061``-style escapes (lower and upper hex) and ``\\/``,
    streamed a few characters a delta, are redacted in the finishing tool's
    and an ordinary call's streamed arguments, which stay JSON, with the
    other characters written out to the same value."""
    secret = "hunter2/very-secret-value"
    raw = ('{"answer": "k sk-\\u0061' + "a" * 29 + ' pw hunter2\\/very\\u002Dsecret-value caf\\u00e9 \\u2028 \\u007f"}')
    streamed, final, report = await _finish_with(raw, [secret], chunk=chunk)
    shown = json.loads(streamed)["answer"]
    assert "sk-aaaa" not in shown and secret not in shown and "hunter2" not in shown, shown
    assert shown.endswith("café \u2028 \x7f"), shown
    assert report.terminal_state is TerminalState.COMPLETED and "hunter2" not in final.get_text_content()
    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[secret]), load_entry_points=False)
    model = ArgStream([calls(("search", raw.replace('"answer"', '"q"'))), text("done")], stream=True,
                      chunk=chunk, model="m")
    agent = make_agent(model, [searcher(ran)], h.middlewares(), name="a")
    events, _, _ = await drive(h, agent)
    shown = json.loads(streamed_args(events))["q"]
    assert "sk-aaaa" not in shown and "hunter2" not in shown, shown
    assert ran.of("search")[0]["q"] == json.loads(raw)["answer"]  # the tool reads what the model wrote


# ====================================================== 2. claims


CANCEL_CLAIM = ToolPolicy(role="mutation", claims=[r"\bcancel+ed\b"])


class ActionsTaken(BaseModel):
    done: dict[str, bool]


async def test_a_structured_output_claiming_an_action_in_a_dict_key_is_withheld() -> None:
    """README: "the answer (its text, or a structured output's strings)
    claims an action whose tool never succeeded ... a structured output is
    withheld". Round 18 made ``_structured_strings`` skip dict keys (a
    fixed schema's field names); a ``dict[str, bool]`` field's keys are
    the model's own words. ``{"done": {"order A-1 cancelled": true}}``,
    with ``cancel_order`` never called, is delivered ``completed``."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    output = {"done": {"order A-1 cancelled": True}}
    model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, ActionsTaken, "cancel A-1")
    report = h.last_report(agent)
    assert ran == []
    assert report.unsupported_claims == ["cancel_order"]
    assert final.structured_output != output


class Statuses(BaseModel):
    orders: list[list[str]]
    count: int


async def test_a_claim_in_a_nested_list_of_a_structured_output_is_withheld() -> None:
    """Regression guard of ``_structured_strings``: a claim nested in lists
    of lists is read; a number beside it is no claim."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    output = {"orders": [["A-1", "cancelled"]], "count": 1}
    model = ScriptedModel([calls(("GenerateStructuredOutput", output)), text("x")], model="m")
    agent = make_agent(model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, Statuses, "status?")
    report = h.last_report(agent)
    assert report.unsupported_claims == ["cancel_order"] and final.structured_output != output


# ====================================================== 3. max_model_calls


class _Flaky(ArgStream):
    """A streaming model whose provider errors AgentScope retries."""

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return (ConnectionError,)


@pytest.mark.parametrize("cap", [1, 2])
async def test_a_streamed_calls_retry_at_the_cap_ends_incomplete_not_failed(cap: int) -> None:
    """Regression guard of ``_OutOfCalls``: a streaming model that fails once.
    Under a cap of 2 the retry is made (2 requests, ``completed``); under a
    cap of 1 it is not: one request, ``incomplete`` (``max_model_calls``),
    the user gets the stop text, never the provider's error."""
    h = Harness(HarnessConfig(max_model_calls=cap), load_entry_points=False)
    model = _Flaky([ConnectionError("reset"), text("the answer")], stream=True, model="m")
    model.max_retries, model.retry_delay = 3, 0.0
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    _, final, report = await drive(h, agent, U1)
    assert len(model.calls) == report.model_calls == cap
    if cap == 2:
        assert (report.terminal_state, final.get_text_content()) == (TerminalState.COMPLETED, "the answer")
    else:
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
        assert "reset" not in (final.get_text_content() or "")


class Outcome(BaseModel):
    summary: str


async def test_structured_sub_agents_under_another_harness_get_no_rounds_past_the_leads_cap() -> None:
    """Regression guard of ``model_cap_reached_above`` across Harnesses: the
    lead (cap 2) delegates to four structured sub-agents under a Harness
    of their own (cap 1 each), one batch. Each sub-agent's own cap would
    give it narrowed rounds; the lead's cap, reached, gives none: the
    calls made stay within the lead's cap plus one sub-agent's narrowed
    round that fit before it was reached."""
    lead_h = Harness(HarnessConfig(max_model_calls=2), load_entry_points=False)
    child_h = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    models, delegates = [], []
    for name in "abcd":
        model = ScriptedModel([calls(("GenerateStructuredOutput", {"summary": f"{name} ok"}))], model="c",
                              repeat=True)
        models.append(model)
        delegates.append(structured_delegate(make_agent(model, [], child_h.middlewares(), name=f"child_{name}"),
                                             f"ask_{name}", Outcome))
    lead_model = ScriptedModel([calls(*[(f"ask_{n}", {"task": "x"}) for n in "abcd"]), text("done")], model="l")
    lead = make_agent(lead_model, delegates, lead_h.middlewares(), name="lead")
    with child_h.acting_for(U1):
        _, _, report = await drive(lead_h, lead, U1)
    served = len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert served <= 2 and report.model_calls <= 2, [(c.reason, c.model_calls) for c in report.children]

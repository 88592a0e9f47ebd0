"""Round 170 a: texts Go's ``encoding/json`` reads other than the harness judged them.

Go 1.21+ folds field names with Unicode 15's simple foldings (``ﬅ``/``ﬆ``, ``ΐ``/``ΐ``,
``ΰ``/``ΰ``), which Python 3.11's Unicode 14 (and its full folding first) keeps apart; Go
reads an escaped lone surrogate as U+FFFD (two such keys are one key); Go refuses ``NaN``,
``Infinity`` and a number beyond a double, and a text of Unicode (not JSON) whitespace.
Each was handed to the client as judged. Now each is refused ``bad_arguments``.
"""
from __future__ import annotations

import sys
from typing import Any

import pytest
from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from hypothesis import given
from hypothesis import strategies as st
from scripted import ALLOW, make_agent

from agentscope_harness import Harness, HarnessConfig, Principal
from agentscope_harness.client_arguments import _NEWER_ORBITS, _go_folded_char, go_folded, read_one_way
from agentscope_harness.testing import ScriptedModel, calls, text

SCHEMA = {"type": "object", "properties": {"terms": {"type": "object",
          "additionalProperties": {"type": "number"}}}, "required": ["terms"]}


def go_tool(schema: dict[str, Any]) -> ToolBase:
    class SaveTerms(ToolBase):
        name = "save_terms"
        description = "Save terms with a weight each on the user's device (a Go app)."
        input_schema = schema
        is_concurrency_safe = False
        is_read_only = False
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
            return ALLOW

    return SaveTerms()


async def handed_and_refused(arguments: str, schema: dict[str, Any] = SCHEMA) -> tuple[list[str], list[str]]:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    m = ScriptedModel([calls(("save_terms", arguments)), text("I could not save them.")])
    agent = make_agent(m, h.instrument(Toolkit(tools=[go_tool(schema)])), h.middlewares())
    handed: list[str] = []
    with h.acting_for(Principal(user_id="u-1")):
        async for item in agent.reply_stream(UserMsg("user", "save my terms")):
            if isinstance(item, RequireExternalExecutionEvent):
                handed += [c.input for c in item.tool_calls]
                break
    report = h.last_report(agent)
    return handed, list(report.refusals) if report else []


# Two keys of one Go orbit: Go's struct/map decoding of a field name matches either.
UNICODE_15_PAIRS = [("\ufb05", "\ufb06"), ("\u1fd3", "\u0390"), ("\u1fe3", "\u03b0")]


@pytest.mark.parametrize(("one", "other"), UNICODE_15_PAIRS)
def test_unicode_15_orbits_fold_as_one(one: str, other: str):
    assert go_folded("a" + one) == go_folded("A" + other)
    assert not read_one_way(f'{{"terms": {{"{one}": 1, "{other}": 2}}}}', {"terms": {one: 1, other: 2}})


@pytest.mark.parametrize(("one", "other"), UNICODE_15_PAIRS)
async def test_a_call_naming_one_key_twice_in_unicode_15_is_never_handed(one: str, other: str):
    arguments = f'{{"terms": {{"{one}": 1, "{other}": 2}}}}'
    handed, refused = await handed_and_refused(arguments)
    assert handed == [] and refused == ["bad_arguments"]


LONE_SURROGATES = [
    r'{"terms": {"\ud800": 1, "\udc00": 2}}',  # Go: both keys are U+FFFD
    r'{"terms": {"\ud800": 1, "\ufffd": 2}}',
    r'{"terms": {"a\udbff": 1}}',
    r'{"terms": {"a": 1}, "\udfff": 3}',
]


@pytest.mark.parametrize("arguments", LONE_SURROGATES)
async def test_a_lone_surrogate_is_never_handed(arguments: str):
    handed, refused = await handed_and_refused(arguments)
    assert handed == [] and refused == ["bad_arguments"]


def test_an_escaped_surrogate_pair_is_its_character_and_passes():
    """Python's json.dumps escapes an emoji as a pair: every reader reads the character."""
    assert read_one_way(r'{"terms": {"\ud83d\ude00": 1}}', {"terms": {"\U0001F600": 1}})
    assert read_one_way(r'{"terms": {"\\ud800": 1}}', {"terms": {"\\ud800": 1}})  # an escaped backslash


NO_JSON = [
    ('{"terms": {"a": NaN}}', {"terms": {"a": float("nan")}}),
    ('{"terms": {"a": Infinity}}', {"terms": {"a": float("inf")}}),
    ('{"terms": {"a": -Infinity}}', {"terms": {"a": float("-inf")}}),
    ('{"terms": {"a": 1e400}}', {"terms": {"a": float("inf")}}),
    ('\u00a0', {}),
    ('\u2003\u3000', {}),
]


@pytest.mark.parametrize(("arguments", "judged"), NO_JSON)
def test_no_json_is_refused(arguments: str, judged: dict[str, Any]):
    assert not read_one_way(arguments, judged, SCHEMA)


async def test_a_text_of_unicode_whitespace_is_never_handed():
    """Infinity and a number beyond a double meet the harness's own argument check first;
    a text of no-break spaces met none: AgentScope reads it as {}, Go reads no JSON."""
    handed, refused = await handed_and_refused("\u00a0", {"type": "object", "properties": {
        "terms": {"type": "object"}}})
    assert handed == [] and refused == ["bad_arguments"]


def test_json_whitespace_alone_is_the_empty_object_and_numbers_a_double_holds_pass():
    assert read_one_way(" \t\r\n", {})
    assert read_one_way('{"terms": {"a": 1.7976931348623157e308, "b": 9007199254740992, "c": -0, "d": 1152921504606846976}}',
                        {"terms": {"a": 1.7976931348623157e308, "b": 2**53, "c": 0, "d": 2**60}})


@pytest.mark.parametrize("integer", [2**53 + 1, 12345678901234567890, -(2**63) - 1, 10**400])
def test_an_integer_a_double_does_not_hold_is_refused(integer: int):
    """Round 171 a: a browser reads 9007199254740993 as 9007199254740992 (another order id),
    and 1 followed by 400 zeros as Infinity."""
    assert not read_one_way(f'{{"terms": {{"a": {integer}}}}}', {"terms": {"a": integer}})


def test_a_key_folds_as_its_characters_fold_one_by_one():
    """go_folded folds a whole key in C (fully folding characters through placeholders):
    each character of every plane folds as it does alone, and no character outside the
    Basic Multilingual Plane folds fully (where the placeholders' table looks)."""
    every = [chr(point) for point in range(sys.maxunicode + 1) if not 0xD800 <= point < 0xE000]
    assert all(len(c.casefold()) == 1 for c in every[0xF800:])
    one_by_one = [go_folded(c) for c in every]
    assert go_folded("".join(every)) == "".join(one_by_one)
    assert all(one == ((_NEWER_ORBITS.get(ord(c)) and chr(_NEWER_ORBITS[ord(c)])) or _go_folded_char(c))
               for c, one in zip(every, one_by_one))


@given(st.text(st.sampled_from("aAſsSkKKßẞ\ufb05\ufb06\u1fd3\u0390ΣσςİıiI中\ud800\udc00\ufffdǅǄǆ\ua7dc\u019b")))
def test_any_key_folds_as_its_characters(key: str):
    assert go_folded(key) == "".join(map(go_folded, key))


@given(st.lists(st.text(st.sampled_from("abcdefghXYZ"), min_size=8, max_size=40), min_size=1, max_size=6),
       st.lists(st.sampled_from("ßẞŉǰΐΰևİﬅ\ud800\ua7dcΣς"), min_size=1, max_size=6))
def test_a_long_key_with_a_few_fully_folding_characters_folds_as_its_characters(runs: list[str], few: list[str]):
    """The route that splits a key at its few fully folding characters (not the placeholders')."""
    key = "".join(run + char for run, char in zip(runs, few, strict=False)) + "".join(runs[len(few):])
    assert go_folded(key) == "".join(map(go_folded, key))

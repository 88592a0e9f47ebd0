"""Tool-call arguments are redacted however the model spells a secret.

``OutputFilter(json_args=True)`` puts every JSON escape in one spelling
(``json.dumps``'s, not ASCII-escaped) before the redactor reads the text, and
the redactor also knows each exact value's JSON spelling. Properties against
``json`` itself, for any value, however the model spells it (ASCII-escaped,
every character escaped, upper-case hex, surrogate pairs) and wherever the
deltas cut it: with no secret in it, the shown text is the same JSON value;
with secrets placed in its strings, none is shown, in any spelling.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.outputs import OutputFilter

SECRET = 'Tr0ub4dor"&3\\x\n🔑z'
"""An exact secret value with a quote, a backslash, a newline and a
character outside the BMP: each spelled in several ways by JSON."""
FILTER = OutputFilter(Harness(HarnessConfig(secret_values=[SECRET, "73019284615"]), load_entry_points=False)
                      .args_redactor, json_args=True)

plain_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
values = st.recursive(
    plain_text | st.integers(-10**6, 10**6) | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(plain_text, inner, max_size=4),
    max_leaves=12,
)


def _spell(text: str, how: str) -> str:
    """``text``'s JSON with its strings spelled as ``how`` says."""
    if how != "every":
        return text
    def spelled(m: re.Match[str]) -> str:
        chars = json.loads(m.group(0))
        out = []
        for c in chars:
            code = ord(c)
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04X}")
        return '"' + "".join(out) + '"'
    return re.sub(r'"(?:[^"\\]|\\.)*"', spelled, text)


def _shown(text: str, cuts: list[int]) -> str:
    stream, out, at = FILTER.stream(), [], 0
    while at < len(text):
        size = cuts[len(out) % len(cuts)]
        out.append(stream.feed(text[at:at + size]))
        at += size
    return "".join(out) + stream.flush()


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from(["ascii", "utf8", "every"]), st.lists(st.integers(1, 7), min_size=1, max_size=9))
def test_arguments_without_secrets_keep_their_value(value: object, how: str, cuts: list[int]) -> None:
    text = _spell(json.dumps(value, ensure_ascii=how == "ascii"), how)
    assert json.loads(_shown(text, cuts)) == value


@settings(max_examples=300, deadline=None)
@given(st.lists(plain_text, min_size=1, max_size=4), st.sampled_from(["ascii", "utf8", "every"]),
       st.lists(st.integers(1, 7), min_size=1, max_size=9))
def test_a_secret_however_spelled_is_never_shown(words: list[str], how: str, cuts: list[int]) -> None:
    value = {"answer": " ".join([*words, SECRET, *words]), "n": 7}
    shown = _shown(_spell(json.dumps(value, ensure_ascii=how == "ascii"), how), cuts)
    got = json.loads(shown)
    assert SECRET not in json.dumps(got, ensure_ascii=False)
    assert got["answer"] == value["answer"].replace(SECRET, "[redacted:secret_value]") and got["n"] == 7


def test_a_secret_number_and_a_labelled_secret_are_not_shown() -> None:
    """A secret written as a JSON number, and a secret found by its label
    (the key beside it), are redacted in the shown text too."""
    shown = _shown('{"pin": 73019284615, "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', [2])
    assert "73019284615" not in shown and "wJalrXUtnFEMI" not in shown

"""Tool-call arguments are redacted as the tool will read them: a secret the
model writes with JSON escapes (``\\u0061``, ``\\/``, a quote as ``\\"``) is
written out before the redactor reads it, and the JSON stays the same value.

Properties against ``json`` itself: for any value, ``unescaped`` of its JSON
(ASCII-escaped or not, every character escaped or not) decodes to the same
value, and streaming it in pieces cut anywhere gives the same text.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness.outputs import JsonEscapes, unescaped

values = st.recursive(
    st.text() | st.integers() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _every_char_escaped(text: str) -> str:
    """JSON of ``text`` with each character of its strings as ``\\uXXXX``."""
    return re.sub(r'"((?:[^"\\]|\\.)*)"', lambda m: '"' + "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in json.loads(m.group(0))
    ).replace("\\u0022", '\\"').replace("\\u005c", "\\\\") + '"', text)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans(), st.booleans(), st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_written_out_escapes_keep_the_json_value(value: object, ascii_only: bool, spelled: bool,
                                                 cuts: list[int]) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    if spelled:
        text = _every_char_escaped(text)
    whole = "".join(unescaped(text))
    assert json.loads(whole) == value
    stream, out, at = JsonEscapes(), [], 0
    for size in cuts * (len(text) // max(sum(cuts), 1) + 1):
        out.append(stream.feed(text[at:at + size]))
        at += size
        if at >= len(text):
            break
    out.append(stream.feed(text[at:]) + stream.flush())
    assert "".join(out) == whole


def test_a_secret_spelled_with_escapes_is_written_out() -> None:
    text, held = unescaped('{"a": "sk-\\u0061bc \\/ \\"q\\" \\\\u0061"}')
    assert (text, held) == ('{"a": "sk-abc / \\"q\\" \\\\u0061"}', "")

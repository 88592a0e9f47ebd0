"""Round 176 c (a perf red team on event-loop stalls): three steps held the loop in one call
on text crafted against their cost, whatever the text's size bound:

- a tool's `pii` on a result of short digit groups (`"4111 "`, `"0201 "`, `"DE12 "`: a card,
  phone or IBAN candidate at every group, 10-20x prose's cost a character): its fixed 4,096
  character steps held the loop 45-120 ms each (1 MB);
- the secret values on a text of near misses (every position a value's opening: one search
  of the whole text, 104 ms for 5 MB);
- configured `secret_values` / `redact_patterns` matched densely: every match of the text
  collected in one step (88-111 ms for 5 MB).

README "Benchmarks" and hook 16: a result of megabytes never holds the event loop. Bound as
the other loop tests of tests/perf, harnessed vs bare, but tighter: max(30 ms, 3 x bare) (each
held 40-100 ms before; 5-16 ms now, prose about as long); the windowed
search of the secret values is checked against one search of the whole, at every window."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness import HarnessConfig, ToolPolicy, redaction
from tests.perf.loopkit import FETCH_PAGE, loop_gaps, page_tool

PII = {"card": "redact", "phone": "mask", "iban": "hash", "email": "redact"}
VALUES = [f"svc{i:03d}-Zq7Rt2Lm9Xv4" for i in range(60)]


def _repeated(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.parametrize(("page", "config"), [
    (_repeated("0201 ", 300_000), {"tools": {"fetch_page": ToolPolicy(role="other", pii=PII)}}),
    (_repeated("DE12 ", 300_000), {"tools": {"fetch_page": ToolPolicy(role="other", pii=PII)}}),
    (_repeated("svc0", 5_000_000), {"secret_values": VALUES}),
    (_repeated("hunter2hunter2 ", 5_000_000), {"secret_values": ["hunter2hunter2"]}),
], ids=["digit_groups_pii", "iban_groups_pii", "value_near_misses", "dense_values"])
async def test_text_crafted_against_a_step_does_not_hold_the_loop(page: str, config: dict) -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        FETCH_PAGE, [page_tool(page)], "read the page", HarnessConfig(**config), model="m")
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.03, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ab", "abc", "abcab", "b", "c", "x", "ca"]), min_size=1, max_size=6),
       st.text(alphabet="abcx", max_size=120), st.integers(1, 9), st.integers(0, 5))
def test_the_values_found_a_window_at_a_time_are_those_one_search_finds(values, text, window, pos):
    """Values as the redactor orders them (longest first), any window size: the same
    non-overlapping matches as one `finditer` of the whole."""
    ordered = sorted(set(values), key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, ordered)))
    pos = min(pos, len(text))
    whole = [(m.start(), m.end()) for m in pattern.finditer(text, pos)]
    saved = redaction.WINDOW
    redaction.WINDOW = window
    try:
        found = [(a, b) for step in redaction._values_found(pattern, len(ordered[0]), text, pos, len(text))
                 for a, b, _ in step]
    finally:
        redaction.WINDOW = saved
    assert found == whole, (ordered, text, window)

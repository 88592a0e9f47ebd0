"""Per-round work is O(new data): what the hot path asks of a run's history
is answered from indexes built as results arrive."""

from __future__ import annotations


def test_successes_are_counted_per_tool_without_a_scan():
    from agentscope_harness.facts import GuardState, call_digest

    facts = GuardState()
    for tool, args, ok in [("a", {"q": 1}, True), ("a", {"q": 1}, True), ("a", {"q": 2}, True),
                           ("b", {}, False), ("b", {"x": 1}, True)]:
        facts.record_outcome(tool, call_digest(tool, args), args, "r", ok, None if ok else "tool_error")
    assert facts.successes_of({"a"}) == 2  # the same call twice is one success
    assert facts.successes_of({"a", "b"}) == 3
    assert facts.successes_of({"c"}) == 0

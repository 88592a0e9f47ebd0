"""Shared checks for the reliability tests: well-formed agent context and
provider payloads, results per call id."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentscope.message import ToolCallBlock, ToolResultBlock


def blocks(agent: Any) -> list[Any]:
    out = []
    for msg in agent.state.context:
        if not isinstance(msg.content, str):
            out.extend(msg.content)
    return out


def call_ids(agent: Any) -> list[str]:
    return [b.id for b in blocks(agent) if isinstance(b, ToolCallBlock)]


def results_by_id(agent: Any) -> dict[str, list[ToolResultBlock]]:
    out: dict[str, list[ToolResultBlock]] = {}
    for b in blocks(agent):
        if isinstance(b, ToolResultBlock):
            out.setdefault(b.id, []).append(b)
    return out


def result_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(getattr(b, "text", "") for b in block.output)


def assert_context_well_formed(agent: Any) -> None:
    """Every tool call in the context has exactly one result, and every
    result answers a call."""
    ids = call_ids(agent)
    assert len(ids) == len(set(ids)), "duplicate call ids"
    results = results_by_id(agent)
    counts = {i: len(results.get(i, [])) for i in ids}
    assert all(n == 1 for n in counts.values()), f"calls without exactly one result: {counts}"
    assert set(results) <= set(ids), f"results without a call: {set(results) - set(ids)}"


def assert_payload_well_formed(call: dict[str, Any]) -> None:
    """The formatted provider payload: every assistant tool_call is answered
    by exactly one tool message, and every tool message answers a call."""
    asked: Counter = Counter()
    answered: Counter = Counter()
    for m in call["formatted"]:
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or []:
                asked[tc["id"]] += 1
        elif m.get("role") == "tool":
            answered[m["tool_call_id"]] += 1
            assert asked[m["tool_call_id"]] == 1, f"tool message before/without its call: {m['tool_call_id']}"
    assert asked == answered, f"orphaned: asked={dict(asked)} answered={dict(answered)}"

"""``@harness_hook(..., when=(policy, config) -> bool)``: a tool-point hook is
skipped for tools it cannot act on (decided once per tool), and the built-in
gates that declare it still refuse where they must."""

from __future__ import annotations

import pytest
from hookkit import drive, harnessed
from scripted import calls, text, tool_messages

from agentscope_harness import HarnessConfig, ToolPolicy
from agentscope_harness.errors import HarnessConfigError
from agentscope_harness.registry import HookRejectSignal, harness_hook


def _tools(ran: list[str]):
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(f"search:{q}")
        return f"results for {q}"

    async def lookup(order_id: str) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
        """
        ran.append(f"lookup:{order_id}")
        return f"order {order_id}: shipped"

    async def note(x: int) -> str:
        """Take a note (no policy: an unconfigured tool).

        Args:
            x (int): The note.
        """
        ran.append(f"note:{x}")
        return "noted"

    return [search, lookup, note]


CONFIG = HarnessConfig(
    tools={"search": ToolPolicy(role="retrieval"), "lookup": ToolPolicy(role="lookup")},
)


async def test_a_hook_runs_only_for_the_tools_its_when_admits():
    seen: list[tuple[str, str]] = []

    @harness_hook(
        "pre_tool_call", priority=60, name="retrieval_only",
        when=lambda policy, config: policy is not None and policy.role == "retrieval",
    )
    def retrieval_only(ctx):
        seen.append(("pre", ctx.tool.name))

    @harness_hook("post_tool_call", priority=60, name="every_tool")
    def every_tool(ctx):
        seen.append(("post", ctx.tool.name))

    ran: list[str] = []
    h, model, agent = harnessed(
        CONFIG,
        [calls(("search", {"q": "kettle"})), calls(("lookup", {"order_id": "o-1"})),
         calls(("note", {"x": 1})), text("done")],
        _tools(ran), hooks=(retrieval_only, every_tool),
    )
    _, final, report = await drive(h, agent)
    assert ran == ["search:kettle", "lookup:o-1", "note:1"]
    assert ("pre", "search") in seen
    assert ("pre", "lookup") not in seen and ("pre", "note") not in seen
    # hooks without when= run for every call, configured or not
    assert [n for p, n in seen if p == "post"] == ["search", "lookup", "note"]
    assert final.get_text_content() == "done"
    assert report.terminal_state.value == "completed"


async def test_a_gate_with_when_still_refuses_the_tools_it_admits():
    @harness_hook(
        "pre_tool_call", priority=60, name="no_search", kind="safety",
        when=lambda policy, config: policy is not None and policy.role == "retrieval",
    )
    def no_search(ctx):
        raise HookRejectSignal("search is closed today", code="closed")

    ran: list[str] = []
    h, model, agent = harnessed(
        CONFIG,
        [calls(("search", {"q": "kettle"})), calls(("lookup", {"order_id": "o-1"})), text("done")],
        _tools(ran), hooks=(no_search,),
    )
    _, _, report = await drive(h, agent)
    assert ran == ["lookup:o-1"]
    results = tool_messages(model.calls[-1])
    assert results[0].startswith("[harness:closed] search is closed today")
    assert report.refusals == {"closed": 1}


async def test_a_failing_when_keeps_the_hook():
    seen: list[str] = []

    def broken(policy, config):
        raise RuntimeError("bug in the predicate")

    @harness_hook("pre_tool_call", priority=60, name="kept", when=broken)
    def kept(ctx):
        seen.append(ctx.tool.name)

    ran: list[str] = []
    h, model, agent = harnessed(
        CONFIG, [calls(("search", {"q": "a"})), text("done")], _tools(ran), hooks=(kept,),
    )
    await drive(h, agent)
    assert seen == ["search"] and ran == ["search:a"]


def test_when_is_refused_outside_the_tool_points():
    with pytest.raises(HarnessConfigError, match="tool points"):
        harness_hook("pre_think", name="bad", when=lambda policy, config: True)(lambda ctx: None)


async def test_builtin_gates_skipped_for_other_tools_still_guard_their_own():
    """sequence_gate, phase_check, search_gate and mark_terminal declare
    when=; each still acts on the tools it is for."""
    ran: list[str] = []

    async def submit(answer: str) -> str:
        """Deliver the answer.

        Args:
            answer (str): The answer.
        """
        ran.append(f"submit:{answer}")
        return "submitted"

    config = HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval"),
            "lookup": ToolPolicy(role="lookup", requires=[{"tool": "search"}]),
            "submit": ToolPolicy(role="finish", requires_facts=["retrieved"]),
        },
        enough_candidates=1,
        escape_after_rejects=5,
    )
    h, model, agent = harnessed(
        config,
        [
            calls(("lookup", {"order_id": "o-1"})),  # sequence_gate: search first
            calls(("submit", {"answer": "early"})),  # phase_check: nothing retrieved
            calls(("search", {"q": "a"})),
            calls(("search", {"q": "b"})),  # search_gate: enough candidates
            calls(("submit", {"answer": "done"})),  # mark_terminal: completes
            text("done"),
        ],
        [*_tools(ran), submit],
    )
    _, _, report = await drive(h, agent)
    assert ran == ["search:a", "submit:done"]
    assert report.refusals == {"prerequisite_missing": 1, "not_ready": 1, "enough_results": 1}
    assert report.terminal_state.value == "completed"
    assert report.reason == "finished"

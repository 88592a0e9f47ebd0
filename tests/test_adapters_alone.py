"""Either adapter can be used alone (DESIGN section 3): tool gates without the
model side, or the model side without tool gates."""

from __future__ import annotations

from scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

from agentscope_harness import Harness, HarnessConfig, Ledger, TerminalState, ToolPolicy
from agentscope_harness.adapters import HarnessAgentAdapter, HarnessToolAdapter

RAN: list[str] = []


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    RAN.append(q)
    return f"found {q}"


def _config() -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=1)},
    )


async def test_tool_adapter_alone_still_gates_tools_per_reply() -> None:
    RAN.clear()
    harness = Harness(_config())
    tool_side = [m for m in harness.middlewares() if isinstance(m, HarnessToolAdapter)]
    model = ScriptedModel([
        calls(("search", {"q": "a"}), ("search", {"q": "b"})), text("one"),
        calls(("search", {"q": "c"})), text("two"),
    ])
    agent = make_agent(model, [search], tool_side)
    await run(agent, "first")
    assert len(RAN) == 1
    assert any(m.startswith("[harness:quota_exhausted]") for m in tool_messages(model.calls[1]))
    await run(agent, "second")  # a new reply is a new run: its ledger starts at 0
    assert len(RAN) == 2
    first = harness.reports[-1]
    assert first.refusals == {"quota_exhausted": 1}
    assert len(harness.table) <= 1  # at most the current reply's run


async def test_agent_adapter_alone_runs_the_model_side() -> None:
    harness = Harness(HarnessConfig(max_model_calls=1))
    agent_side = [m for m in harness.middlewares() if isinstance(m, HarnessAgentAdapter)]
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    agent = make_agent(model, [search], agent_side)
    _, final = await run(agent)
    report = harness.last_report(agent)
    assert len(model.calls) == 1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert len(harness.table) == 0

"""Budgets the model can see, cache-bust detection, candidate policies.

- status line vs hints alone: a model that keeps searching until a budget
  status line tells it the budget is low, then delivers (it ignores every
  other hint). With ``disclose_budget="changes"`` it is told at the retrieval
  ledger's soft limit; with ``"off"`` (hints alone) it searches on, is
  refused, and is stopped at ``max_model_calls``. Figures: model calls and
  wasted calls (refused calls plus calls after the soft limit) per run, and
  how many runs complete. Deterministic.
- prefix observer: the cost of checking one payload against the previous
  call (what ``on_model_call`` adds), on a growing 60-message run.
- candidate policy: wall time of a run with a candidate policy judged in
  shadow beside the live one, against the same run without.
"""

from __future__ import annotations

import time
from typing import Any

from agentscope.message import Msg, TextBlock, UserMsg
from agentscope.state import AgentState

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy
from agentscope_harness.prefix import observe
from agentscope_harness.testing import ScriptedModel, Turn, calls, text

from ._common import Tools, make_agent
from ._report import Figure, Section

SIZES = {"quick": {"runs": 2, "payloads": 10, "timed": 2}, "full": {"runs": 20, "payloads": 60, "timed": 20}}
MAX_CALLS = 12


def _reader(turn: Turn) -> Any:
    """Searches until a status line is in its payload, then delivers."""
    if any("[harness:budget]" in str(m.get("content")) for m in turn.formatted):
        return calls(("submit_answer", {"answer": "the best kettle"}))
    return calls(("search", {"q": f"kettle {turn.rounds}"}))


def _config(disclose: str, soft_at: int, **kw: Any) -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
               "submit_answer": ToolPolicy(role="finish")},
        ledgers={"retrieval": Ledger(cap=soft_at + 2, soft_at=soft_at)},
        max_model_calls=MAX_CALLS, disclose_budget=disclose, **kw,  # type: ignore[arg-type]
    )


async def _disclosure(disclose: str, runs: int) -> dict[str, float]:
    calls_total = wasted = completed = 0
    for i in range(runs):
        soft_at = 2 + i % 4
        h = Harness(_config(disclose, soft_at), environ={}, load_entry_points=False)
        agent = make_agent(ScriptedModel(_reader), Tools(), h)  # type: ignore[arg-type]
        await agent.reply(UserMsg("user", "Find me a good kettle."))
        report = h.last_report(agent)
        assert report is not None
        calls_total += report.model_calls
        # the calls a well-informed model would not make: every call after
        # the one that reached the soft limit, except the delivering one
        wasted += max(report.model_calls - (soft_at + 1), 0)
        completed += report.terminal_state.value == "completed"
    return {"calls": calls_total / runs, "wasted": wasted / runs, "completed": completed / runs}


def _observer_cost(n: int) -> float:
    """Microseconds per ``observe`` over a run growing to ``n`` messages."""
    h = Harness(HarnessConfig(), environ={}, load_entry_points=False)
    run = h.table.open("bench", "a", None, None, None, None, "enforce")
    state = AgentState()  # never compressed
    tools = [{"type": "function", "function": {"name": f"t{i}", "parameters": {}}} for i in range(8)]
    messages: list[Msg] = [UserMsg("user", [TextBlock(text="find a kettle " * 20)])]
    spent = 0.0
    for i in range(n):
        messages.append(Msg(name="a", content=[TextBlock(text=f"result {i} " * 100)], role="assistant"))
        t0 = time.perf_counter()
        observe(h.services, run, messages, tools, None, state)
        spent += time.perf_counter() - t0
    assert run.prefix_breaks == 0
    return spent / n * 1e6


async def _candidate_wall(with_candidate: bool, runs: int) -> float:
    spent = 0.0
    for _ in range(runs):
        live = _config("changes", 6)
        h = Harness(live, candidate=_config("changes", 2) if with_candidate else None,
                    environ={}, load_entry_points=False)
        model = ScriptedModel([calls(("search", {"q": f"k{i}"})) for i in range(8)]
                              + [calls(("submit_answer", {"answer": "a kettle"})), text("done")])
        agent = make_agent(model, Tools(), h)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        await agent.reply(UserMsg("user", "Find me a good kettle."))
        spent += time.perf_counter() - t0
    return spent / runs * 1000


async def run(size: str = "full") -> Section:
    s = SIZES[size]
    section = Section("Budgets: status line, cache breaks, candidate policy")
    told, alone = await _disclosure("changes", s["runs"]), await _disclosure("off", s["runs"])
    section.figures.append(Figure(
        "budgets", "status line vs hints alone: model calls per run", told["calls"], alone["calls"],
        goal="fewer", met=told["calls"] < alone["calls"],
        note=f"completed {told['completed']:.0%} vs {alone['completed']:.0%} of runs",
    ))
    section.figures.append(Figure(
        "budgets", "status line vs hints alone: wasted calls per run", told["wasted"], alone["wasted"],
        goal="0", met=told["wasted"] == 0, show_ratio=False,
    ))
    cost = _observer_cost(s["payloads"])
    section.figures.append(Figure(
        "budgets", f"prefix observer per model call ({s['payloads']} messages)", cost, None,
        unit="us", goal="< 1000 us", met=cost < 1000,
    ))
    with_c = await _candidate_wall(True, s["timed"])
    without = await _candidate_wall(False, s["timed"])
    section.figures.append(Figure(
        "budgets", "run with a candidate policy in shadow (8 tool calls)", with_c, without,
        unit="ms", goal="<= 1.3x", met=with_c <= 1.3 * without,
        note="bare column: the same harnessed run without a candidate",
    ))
    section.data = {"told": told, "alone": alone, "observer_us": cost}
    return section

"""Red team, round 95 (fleet): a run budget parked on its question started
again from nothing on another worker.

``CostPolicy(cap_usd=0.010, on_exhausted="ask")``: Alice's reply spends
$0.0096 and parks on the budget question (``waiting_input``). README ("Ask a
human"): until a human answers, every reply of that agent continues the
spent budget and asks again. Served by another worker (a new Harness and
Agent over the same store, the agent's state restored) or by the same
worker after a restart, her next message got a fresh $0.010: seven more
model calls, past the cap the human was asked to raise. The parked budget
lived in the parking Harness's memory only; it now lives in the agent's
state (``middle_context``), which travels with it.

Real ``Agent``s, a real tool in a real ``Toolkit``, one SQLite file or one
Redis shared by the two workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from round95_fleet_kit import kinds, lookup, store_of
from scripted import ALICE, BOB, ScriptedModel, calls, drain, make_agent, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState

PRICES = {"scripted": ModelPrice(1.0, 1.0)}
CAP = 0.010


def _script() -> list[Any]:
    return [calls(("lookup", {"q": "a"}), inp=4000), calls(("lookup", {"q": "b"}), inp=5600),
            *[calls(("lookup", {"q": q}), inp=1500) for q in "cdefghij"], text("done")]


@pytest.mark.parametrize("kind", kinds())
async def test_a_parked_budget_is_continued_wherever_the_next_message_lands(kind: str, tmp_path: Path) -> None:
    make_store = store_of(kind, tmp_path)

    def worker() -> Harness:
        return Harness(HarnessConfig(store=make_store(), cost=CostPolicy(cap_usd=CAP, prices=PRICES,
                                                                         on_exhausted="ask")),
                       load_entry_points=False, environ={})

    here = worker()
    model = ScriptedModel(_script())
    agent = make_agent(model, here.instrument(Toolkit(tools=[tool(lookup)])), middlewares=here.middlewares())
    with here.acting_for(ALICE):
        await drain(agent, UserMsg("user", "research this"))
    parked = here.last_report(agent)
    assert parked is not None and parked.terminal_state is TerminalState.WAITING_INPUT
    saved = agent.state.model_dump_json()

    # worker B: a new Harness and Agent over the same store, the state restored
    there = worker()
    moved = make_agent(model, there.instrument(Toolkit(tools=[tool(lookup)])), middlewares=there.middlewares(),
                       state=AgentState.model_validate_json(saved))
    calls_before = len(model.calls)
    with there.acting_for(ALICE):
        await drain(moved, UserMsg("user", "go on"))
    again = there.last_report(moved)
    assert again is not None
    assert again.terminal_state is TerminalState.WAITING_INPUT  # asked again: the budget is still spent
    assert len(model.calls) == calls_before  # no model call past the cap
    assert any(d.action == "continue_budget" for d in again.decisions)

    # a human approves more there: the next reply continues under the extension
    with there.acting_for(ALICE):
        there.extend(moved, usd=0.01)
        await drain(moved, UserMsg("user", "go on"))
    extended = there.last_report(moved)
    assert extended is not None and len(model.calls) > calls_before
    assert [e["by"] for e in extended.extensions] == [0.01]

    # another caller's reply to the restored agent is a task of its own
    fresh = make_agent(ScriptedModel([text("hi")]), there.instrument(Toolkit(tools=[tool(lookup)])),
                       middlewares=there.middlewares(), state=AgentState.model_validate_json(saved))
    with there.acting_for(BOB):
        await drain(fresh, UserMsg("user", "hello"))
    bobs = there.last_report(fresh)
    assert bobs is not None and bobs.terminal_state is TerminalState.COMPLETED


async def test_a_parked_budget_that_does_not_read_back_is_not_continued(tmp_path: Path) -> None:
    """A state edited (or of another version) whose parked budget does not read back: nothing is
    carried and nothing fails; ``extend`` says there is nothing to extend."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=CAP, prices=PRICES, on_exhausted="ask")),
                load_entry_points=False, environ={})
    model = ScriptedModel([text("hi")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    agent.state.middle_context["agentscope_harness.parked_budgets"] = {ALICE.key: {"carried_usd": "lots"}}
    with h.acting_for(ALICE), pytest.raises(ValueError, match="no run waiting"):
        h.extend(agent, usd=1.0)
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "hello"))
    report = h.last_report(agent)
    assert report is not None and report.terminal_state is TerminalState.COMPLETED

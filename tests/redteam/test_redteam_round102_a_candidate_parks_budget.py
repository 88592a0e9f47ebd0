"""Red team, round 102 (a): a candidate policy parks a budget in the live
agent's state. README (Candidate policies): the candidate "never charges,
claims or shows anything". Its services run with ``shadow = False`` (it
judges as if enforcing), so when its own ``CostPolicy(on_exhausted="ask")``
cap is spent its ``budget_router`` calls ``budget_spent(..., park=True)``,
which writes a parked budget into ``agent.state.middle_context`` (the live
agent's state, not the candidate's). The live run completed; the user's
next message, a new task, continues the candidate's "parked" spend
(``continue_budget``) and is asked to approve a larger budget it never
used up.

Real ``Agent``, a real tool in a real ``Toolkit``."""

from __future__ import annotations

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from round95_fleet_kit import lookup
from scripted import ALICE, ScriptedModel, calls, drain, make_agent, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState

PRICES = {"scripted": ModelPrice(1.0, 1.0)}


async def test_a_candidates_budget_question_never_carries_into_the_live_next_task() -> None:
    live = HarnessConfig(cost=CostPolicy(cap_usd=0.010, prices=PRICES, on_exhausted="ask"))
    candidate = HarnessConfig(cost=CostPolicy(cap_usd=0.005, prices=PRICES, on_exhausted="ask"))
    h = Harness(live, candidate=candidate, load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("lookup", {"q": "a"}), inp=6000), text("found a"),  # task 1: $0.006 of the live $0.010
        calls(("lookup", {"q": "b"}), inp=6000), text("found b"),  # task 2: $0.006 of its own $0.010
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "research a"))
        first = h.last_report(agent)
        await drain(agent, UserMsg("user", "thanks; now research b, a new task"))
        second = h.last_report(agent)
    assert first is not None and second is not None
    assert first.terminal_state is TerminalState.COMPLETED  # the live run never parked
    carried = [d.detail for d in second.decisions if d.action == "continue_budget"]
    assert not carried and second.terminal_state is TerminalState.COMPLETED, (
        f"the live next task continued a budget only the candidate parked: {carried}; "
        f"it ended {second.terminal_state.value} ({second.reason})"
    )

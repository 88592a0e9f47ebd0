"""Red team, round 46: what a parked run leaves on a shared agent.

1. a run parked on its budget (``CostPolicy(on_exhausted="ask")``) and the
   extension a human approved belong to the caller whose run parked: another
   caller's reply to the same agent is a task of its own.

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import pytest
from scripted import ScriptedModel, calls, make_agent, run, search

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, Principal, TerminalState

ALICE = Principal(user_id="alice", tenant="acme")
BOB = Principal(user_id="bob", tenant="acme")
PRICE = {"scripted": ModelPrice(input_per_mtok=100.0, output_per_mtok=0.0)}  # 1 input token: $0.0001


def _shared_agent() -> tuple[Harness, ScriptedModel, object]:
    """A $0.25 run cap that asks; every model call costs $0.10."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.25, on_exhausted="ask", prices=PRICE)),
                load_entry_points=False)
    model = ScriptedModel(lambda _: calls(("search", {"q": f"mugs {len(model.calls)}"}), inp=1000, out=0))
    return h, model, make_agent(model, [search], h.middlewares())


async def _park(h: Harness, agent: object, who: Principal) -> None:
    with h.acting_for(who):
        await run(agent, "research mugs")
    assert h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT


async def test_another_callers_reply_takes_neither_the_parked_budget_nor_its_extension() -> None:
    """README 'Never acts for the wrong caller'; a parked budget and its
    extension belong to the caller whose run parked. Bob's reply gets a
    budget of its own ($0.25, 3 calls), not Alice's spent one plus her $1."""
    h, model, agent = _shared_agent()
    await _park(h, agent, ALICE)
    with h.acting_for(ALICE):
        h.extend(agent, usd=1.0)
    with h.acting_for(BOB):
        await run(agent, "my own question")
    bobs = h.last_report(agent)
    assert bobs.extensions == []
    assert [d.action for d in bobs.decisions if d.action in ("continue_budget", "extend")] == []
    assert bobs.spent_usd == pytest.approx(0.30)  # his own cap: the call over $0.25 is the one it asks after
    with h.acting_for(ALICE):
        await run(agent, "yes, continue")
    alices = h.last_report(agent)
    assert alices.extensions == [{"what": "usd", "by": 1.0, "approved_by": "alice"}]
    assert "continue_budget" in [d.action for d in alices.decisions]


async def test_with_two_callers_parked_extend_decides_on_the_bound_callers_budget() -> None:
    """Both parked on one agent: an extension bound to Bob extends Bob's;
    with nobody bound it is ambiguous and refused, naming what to do."""
    h, _, agent = _shared_agent()
    await _park(h, agent, ALICE)
    await _park(h, agent, BOB)
    with pytest.raises(ValueError, match="several callers"):
        h.extend(agent, usd=1.0)
    with h.acting_for(BOB):
        h.extend(agent, usd=1.0)
        await run(agent, "go on")
    assert h.last_report(agent).extensions[0]["approved_by"] == "bob"
    with h.acting_for(ALICE):
        h.decline(agent)
        await run(agent, "a new task")
    assert "continue_budget" not in [d.action for d in h.last_report(agent).decisions]

"""Round 101: a parked budget is continued by one reply, fleet-wide.

``CostPolicy(cap_usd=0.010, on_exhausted="ask")``: Alice's reply spends
$0.0096 and parks on the budget question; a human approves $0.010 more and
the state is saved. Two replies loading that state at once (two agents in
one process here; worker processes in round 99 (b)) must not both spend the
extension: the park is claimed in the store. A store that cannot claim it
ends the reply ``dependency_down`` and leaves the parked budget for the next.

Real ``Agent``s, a real tool in a real ``Toolkit``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from round95_fleet_kit import lookup
from scripted import ALICE, ScriptedModel, calls, drain, make_agent, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState
from agentscope_harness.approvals import BUDGETS_KEY
from agentscope_harness.stores import SQLiteStore

PRICES = {"scripted": ModelPrice(1.0, 1.0)}
CAP, MORE = 0.010, 0.010


def _script() -> list[Any]:
    return [calls(("lookup", {"q": "a"}), inp=4000), calls(("lookup", {"q": "b"}), inp=5600),
            *[calls(("lookup", {"q": q}), inp=1500) for q in "cdefghij"], text("done")]


def _harness(store: Any = None) -> Harness:
    extra = {"store": store} if store is not None else {}
    return Harness(HarnessConfig(cost=CostPolicy(cap_usd=CAP, prices=PRICES, on_exhausted="ask"), **extra),
                   load_entry_points=False, environ={})


async def _parked_and_extended(h: Harness) -> tuple[str, float]:
    """Alice's reply parks on its budget; a human approves ``MORE``: the
    saved state, and what the parked run spent."""
    agent = make_agent(ScriptedModel(_script()), h.instrument(Toolkit(tools=[tool(lookup)])),
                       middlewares=h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "research this"))
        parked = h.last_report(agent)
        assert parked.terminal_state is TerminalState.WAITING_INPUT
        h.extend(agent, usd=MORE)
    return agent.state.model_dump_json(), parked.spent_usd


def _loaded(h: Harness, saved: str) -> Any:
    return make_agent(ScriptedModel(_script()[2:]), h.instrument(Toolkit(tools=[tool(lookup)])),
                      middlewares=h.middlewares(), state=AgentState.model_validate_json(saved))


async def test_two_replies_loading_one_state_spend_its_extension_once() -> None:
    h = _harness()
    saved, spent = await _parked_and_extended(h)
    first, second = _loaded(h, saved), _loaded(h, saved)
    with h.acting_for(ALICE):
        await asyncio.gather(drain(first, UserMsg("user", "go on")), drain(second, UserMsg("user", "go on")))
    reports = [h.last_report(first), h.last_report(second)]
    assert sorted(len(r.extensions) for r in reports) == [0, 1], [r.extensions for r in reports]
    loser = next(r for r in reports if not r.extensions)
    assert loser.terminal_state is TerminalState.WAITING_INPUT  # it carried the spend: asked again
    assert any("another reply continued it" in (d.detail or "") for d in loser.decisions)
    assert loser.spent_usd <= CAP - spent + 1e-9, loser.spent_usd  # at most what was left of the cap


class ClaimDown(SQLiteStore):
    """A store whose park claims fail while ``down``."""

    down = True

    async def park_claim(self, park_id: str, **kw: Any) -> bool:
        if self.down:
            raise ConnectionError("store unreachable")
        return await super().park_claim(park_id, **kw)


async def test_a_store_that_cannot_claim_the_park_leaves_it_for_the_next_reply(tmp_path: Path) -> None:
    store = ClaimDown(str(tmp_path / "h.db"))
    h = _harness(store)
    saved, _ = await _parked_and_extended(h)
    agent = _loaded(h, saved)
    calls_before = len(agent.model.calls)
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "go on"))
    down = h.last_report(agent)
    assert (down.terminal_state, down.reason) == (TerminalState.INCOMPLETE, "dependency_down"), down.reason
    assert len(agent.model.calls) == calls_before and not down.extensions
    assert agent.state.middle_context[BUDGETS_KEY], "the parked budget was lost with the failed claim"

    store.down = False
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "go on"))
    back = h.last_report(agent)
    assert [e["by"] for e in back.extensions] == [MORE]
    assert len(agent.model.calls) > calls_before

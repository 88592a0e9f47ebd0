"""Red team, round 104 (b): a parked budget's claim whose answer is lost
loses the human's extension for good.

Round 101: "a store that does not answer ends that reply dependency_down with
the parked budget left in the state". The claim (``park_claim``, a SET NX on
Redis, a write on SQLite) is made on the server; only its answer comes late
(past the store's 2 s ``timeout_s``: a slow network, a loaded host). The reply
ends ``dependency_down`` and the parked budget stays in the state, but its
claim is taken and never given back (as a lease or reservation an abandoned
call took is: ``given_back_if_abandoned``). The retry of that message loses
the claim: "another reply continued it (and took any extension)", which none
did, and asks the human again; the $0.005 approved is never spent.

Real ``Agent``, real tools in a real (instrumented) ``Toolkit``, one SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, drain, make_agent, search, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice
from agentscope_harness.stores import SQLiteStore


class FirstClaimAnswerLate(SQLiteStore):
    """The first park claim is made, and its answer arrives after the 2 s timeout."""

    late = True

    async def park_claim(self, park_id: str, **kw: Any) -> bool:
        taken = await super().park_claim(park_id, **kw)
        if self.late:
            self.late = False
            await asyncio.sleep(2.5)
        return taken


@pytest.mark.xfail(strict=True, reason=(
    "stated limit (README, Ask a human): a claim the store took but whose answer was lost (past timeout_s) "
    "stays taken; the retry carries the spend and asks the human again"
))
async def test_a_claim_whose_answer_was_lost_leaves_the_extension_to_the_retry(tmp_path: Path) -> None:
    h = Harness(HarnessConfig(
        store=FirstClaimAnswerLate(str(tmp_path / "fleet.db")),
        cost=CostPolicy(cap_usd=0.010, on_exhausted="ask", prices={"scripted": ModelPrice(1.0, 1.0)}),
    ), load_entry_points=False, environ={})
    script = [calls(("search", {"q": "a"}), inp=4000), calls(("search", {"q": "b"}), inp=5600),
              *[calls(("search", {"q": q}), inp=1500) for q in "cdefghijklm"], text("done")]
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(),
                       name="research")
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "research the market"))
        h.extend(agent, usd=0.005)  # the human approves $0.005 more
        await drain(agent, UserMsg("user", "go on"))
    lost = h.last_report(agent)
    assert lost is not None and lost.reason == "dependency_down"
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "go on"))  # the user retries
    retry = h.last_report(agent)
    assert retry is not None
    assert retry.extensions and retry.spent_usd > 0, (
        retry.terminal_state.value, retry.reason,
        [d.detail for d in retry.decisions if d.action == "continue_budget"])

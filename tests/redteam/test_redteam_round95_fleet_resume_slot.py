"""Red team, round 95 (fleet): a reply parked on a human and answered on
another worker is refused by its own run slot.

``ConcurrencyLimit(scope="principal", max_in_flight=1)``: Alice's reply
parks on a payout's confirmation (worker A holds her one run slot; a parked
run's lease is not renewed and lapses after ``lease_s``). Her "yes" reaches
worker B (a new Harness and Agent over the same store, the state restored:
the park record lets B hold the resume to what A recorded). B's resume
takes a slot anew (``Fleet.resume_run`` -> ``_take_run_slots``), and the
only slot is held by the very run it resumes: the confirmed payout never
runs, the reply ends ``incomplete`` (``concurrency_limited``), and every
new reply of Alice is refused for up to ``lease_s`` (300 s) although
nothing of hers is in flight. Answered on worker A the same resume renews
its own lease and completes.

Real ``Agent``s, real tools in real ``Toolkit``s, one SQLite file or one
Redis shared by the two workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from round95_fleet_kit import ACTED, kinds, lookup, pay_out, store_of
from scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, ToolPolicy

PAY_OUT = ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                     ask_when=lambda args: "over 50" if args["amount"] > 50 else None)


def _toolkit(harness: Harness) -> Toolkit:
    return harness.instrument(Toolkit(tools=[tool(pay_out), tool(lookup)]))


@pytest.mark.parametrize("kind", kinds())
async def test_a_park_answered_on_another_worker_is_not_refused_by_its_own_run_slot(
    kind: str, tmp_path: Path,
) -> None:
    ACTED.clear()
    make_store = store_of(kind, tmp_path)

    def config() -> HarnessConfig:
        return HarnessConfig(store=make_store(), tools={"pay_out": PAY_OUT},
                             concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=300)])

    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid 80.")])
    here = Harness(config(), load_entry_points=False, environ={})
    agent = make_agent(model, _toolkit(here), middlewares=here.middlewares())
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "pay me 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    assert ACTED == []  # parked: nothing paid yet

    # worker B: a new Harness and Agent over the same store, the state restored
    there = Harness(config(), load_entry_points=False, environ={})
    agent = make_agent(model, _toolkit(there), middlewares=there.middlewares(),
                       state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with there.acting_for(ALICE):
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    report = there.last_report(agent)
    assert report is not None
    # the human's yes is carried out: the only run slot is this very run's
    assert ACTED == [("pay_out", 80)], (report.terminal_state.value, report.reason)
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")

    # nothing of Alice's is in flight now: her next reply (on the worker that served her) is admitted
    fresh: Any = make_agent(ScriptedModel([calls(("lookup", {"q": "order"})), text("Found it.")]),
                            _toolkit(there), middlewares=there.middlewares(), name="fresh")
    with there.acting_for(ALICE):
        await drain(fresh, UserMsg("user", "find my order"))
    again = there.last_report(fresh)
    assert again is not None
    assert (again.terminal_state.value, again.reason) == ("completed", "answered")
    assert ACTED == [("pay_out", 80), ("lookup", "order")]

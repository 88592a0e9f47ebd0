"""r158c: a call that claims the fleet's half-open probe and is then parked
for a human keeps the probe out of the store for the 60 s probe lease:
meanwhile every other worker's calls of the tool are refused "it is
failing" although no probe runs, and the human's approval, answered on
another worker, is refused too (the run ends `dependency_down`, the
approved refund never made, the service up all along).

README, "Running many workers": "circuit breakers (exactly one half-open
probe across the fleet; ... one that comes to no outcome, dropped or not
made, opens it again for a cooldown)"; hook #12: "refused as
`dependency_down` for `breaker_cooldown_s`, then exactly one half-open
probe fleet-wide". "Ask a human": the answer may reach another worker ("A
resumed run takes a slot again, on whichever worker the answer reaches").

Attack: workers A and B on one Redis; `refund` (breaker_failures=1,
breaker_cooldown_s=0.5; `ask_when` over $50). Bob's small refund fails
(connection refused): the breaker opens. The payments service comes back.
After the cooldown Alice asks A for a $500 refund: the call claims the
probe at the breaker gate, then `ask_when` parks it. 2 s later (4
cooldowns) Bob's $5 refund reaches B, and Alice's approval reaches B.

What happened: the store holds the breaker `half` until the probe lease
(+60 s), A keeps the probe as a local spare. Bob on B: "[harness:
dependency_down] refund is unavailable (it is failing)"; Alice's approved
refund on B: the same, run `incomplete`/`dependency_down`, nothing refunded.
Should: a probe whose call is parked (not made) opens the breaker again for
one cooldown (or is given back): B's next call is the probe and runs.
The control resumes on A, within its spare's minute: the refund runs.
"""
from __future__ import annotations

import asyncio

from agentscope.agent import Agent, InjectionConfig
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, Payments, redis_store, told
from scripted import ALICE, BOB, confirm, drain

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 0.5


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(
        store=redis_store(prefix), breaker_failures=1, breaker_cooldown_s=COOLDOWN_S,
        tools={"refund": ToolPolicy(role="mutation",
                                    ask_when=lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None)},
    ), load_entry_points=False, environ={})


def _agent(h: Harness, pay: Payments, model: ScriptedModel, state: AgentState | None = None) -> Agent:
    kw = {} if state is None else {"state": state}
    return Agent(name="desk", system_prompt="You help.", model=model,
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(pay.refund, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False), **kw)


async def _scenario(prefix: str, answer_on: str) -> tuple[Payments, list[str], list[str], str]:
    a, b = _worker(prefix), _worker(prefix)
    pay = Payments()
    first = _agent(a, pay, ScriptedModel([calls(("refund", {"order": "b-1", "amount": 5.0})), text("sorry")]))
    with a.acting_for(BOB):
        await drain(first, UserMsg("user", "refund b-1"))  # fails: the breaker opens
    assert pay.ran == ["b-1"]
    await asyncio.sleep(COOLDOWN_S * 2)
    pay.up = True

    model = ScriptedModel([calls(("refund", {"order": "a-9", "amount": 500.0})), text("done"), text("done")])
    alices = _agent(a, pay, model)
    with a.acting_for(ALICE):
        items = await drain(alices, UserMsg("user", "refund a-9"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))  # parked for a human

    await asyncio.sleep(4 * COOLDOWN_S)
    h = b if answer_on == "b" else a
    bobs = _agent(h, pay, ScriptedModel([calls(("refund", {"order": "b-2", "amount": 5.0})), text("done")]))
    with h.acting_for(BOB):
        await drain(bobs, UserMsg("user", "refund b-2"))
    there = alices if h is a else _agent(b, pay, model, AgentState.model_validate_json(alices.state.model_dump_json()))
    with h.acting_for(ALICE):
        await drain(there, confirm(ask, ask.tool_calls[0]))
    return pay, told(bobs), told(there), h.last_report(there).reason


async def test_a_probe_parked_for_a_human_blocks_the_fleet_and_the_approval_elsewhere(prefix: str) -> None:
    pay, bob_told, alice_told, reason = await _scenario(prefix, "b")
    assert "a-9" in pay.ran and "b-2" in pay.ran, (
        f"payments is up and no probe runs (Alice's probe call waits for a human), 4 cooldowns later: "
        f"Bob on worker B was told {bob_told[-1:]}; Alice's approved refund on B was told {alice_told[-1:]} "
        f"(run {reason}); refunds made: {pay.ran}")


async def test_control_the_approval_on_the_parking_worker_runs(prefix: str) -> None:
    pay, _, alice_told, reason = await _scenario(prefix, "a")
    assert "a-9" in pay.ran, (alice_told, reason)

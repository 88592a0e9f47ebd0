"""r159a: a call that never claimed the half-open probe (it rode on the
spare another call of the same worker claimed a moment before) and is then
parked for a human "gives back" that probe: the breaker reopens for a
cooldown, and the call that DID claim it, admitted a moment later, is
refused "crm is unavailable (another call is checking whether it is back)"
though no call is checking, with the service up.

README "Running many workers": "circuit breakers (exactly one half-open
probe across the fleet ...; one that comes to no outcome, dropped, refused by
a later gate, parked for a human or not made, opens it again for a cooldown,
so the next call anywhere probes then)"; hook #12 "then exactly one half-open
probe fleet-wide". The probe here came to an outcome-to-be: its call was
admitted; the parked call was never the probe.

Attack: one worker on Redis, `refund` (breaker_failures=1, ask_when over $50).
The breaker opens; payments come back. After the cooldown Alice's $5 refund
claims the probe at the breaker gate and is then checked by a user's async
pre_tool_call hook (priority 60, a fraud-check service answering in 0.3 s).
Meanwhile Bob's $500 refund on the same worker passes the breaker gate on
Alice's spare and is parked by `ask_when`. The fraud check passes Alice.
What happened: Alice's refund is refused, nothing refunded. Should: Bob's
park leaves Alice's claimed probe alone; her refund runs and closes the
breaker.
"""
from __future__ import annotations

import asyncio

from agentscope.agent import Agent, InjectionConfig
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, Payments, redis_store, told
from scripted import ALICE, BOB

from agentscope_harness import Harness, HarnessConfig, ToolPolicy, harness_hook
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 0.5


def _agent(h: Harness, pay: Payments, script) -> Agent:
    return Agent(name="desk", system_prompt="You help.", model=ScriptedModel(script),
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(pay.refund, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False))


async def _drain(h: Harness, agent: Agent, who, prompt: str) -> list:
    with h.acting_for(who):
        return [item async for item in agent.reply_stream(UserMsg("user", prompt))]


async def test_a_parked_call_gives_back_the_probe_another_call_claimed(prefix: str) -> None:
    checking, passed = asyncio.Event(), asyncio.Event()

    @harness_hook("pre_tool_call", priority=60, name="fraud_check", kind="safety")
    async def fraud_check(ctx) -> None:
        if ctx.tool.args.get("order") == "a-1":
            checking.set()
            await passed.wait()  # the fraud service answers: fine

    a = Harness(HarnessConfig(
        store=redis_store(prefix),
        breaker_failures=1, breaker_cooldown_s=COOLDOWN_S,
        tools={"refund": ToolPolicy(role="mutation",
                                    ask_when=lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None)},
    ), hooks=[fraud_check], load_entry_points=False, environ={})
    pay = Payments()
    await _drain(a, _agent(a, pay, [calls(("refund", {"order": "b-0", "amount": 5.0})), text("sorry")]),
                 BOB, "refund b-0")  # fails: the breaker opens
    assert pay.ran == ["b-0"]
    await asyncio.sleep(COOLDOWN_S * 2)
    pay.up = True

    alice = _agent(a, pay, [calls(("refund", {"order": "a-1", "amount": 5.0})), text("done")])
    alices = asyncio.ensure_future(_drain(a, alice, ALICE, "refund a-1"))  # claims the probe, then is checked
    await asyncio.wait_for(checking.wait(), 10)
    bob = _agent(a, pay, [calls(("refund", {"order": "b-9", "amount": 500.0})), text("asked")])
    items = await _drain(a, bob, BOB, "refund b-9")
    assert any(isinstance(i, RequireUserConfirmEvent) for i in items)  # parked for a human
    await asyncio.sleep(0.3)
    passed.set()
    await alices
    assert "a-1" in pay.ran, (
        f"payments are up and Alice's call claimed the one probe; Bob's call, parked, never held it: "
        f"Alice was told {told(alice)}; refunds made: {pay.ran}")

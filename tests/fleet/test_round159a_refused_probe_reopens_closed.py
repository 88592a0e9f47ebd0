"""r159a: a call that claimed the fleet's half-open probe and is refused by
a later gate after the probe's store lease lapsed gives the probe "back"
with a probe outcome (`_reopen`: breaker_record(False, probe=True)) even
though another worker's probe has meanwhile closed the breaker: the failure
lands on the CLOSED breaker, counts as a dependency failure and (with
breaker_failures=1) opens it again for everyone, with the service up.

README "Running many workers": "only the probe's outcome decides a half-open
breaker, never a late one ...; one that comes to no outcome, dropped,
refused by a later gate, parked for a human or not made, opens it again for
a cooldown"; hook #12: open after `breaker_failures` consecutive dependency
failures (a call that never ran is no dependency failure).

Attack: workers A and B on one Redis, `crm` (breaker_failures=1). The breaker
opens; the CRM comes back. A's call claims the probe at the breaker gate and
then waits in a slower later gate (a custom priority-60 pre_tool_call hook,
hook_timeout_s raised) past the probe's lease (PROBE_LEASE_S lowered to 1 s
as r158c's own test does; 60 s in production). Meanwhile B's call is the
probe, runs, succeeds: the breaker closes. Then A's gate refuses.
What happened: A's give-back reopens the closed breaker; B's next call is
refused "it is failing" although the CRM answered. Should: a give-back only
reopens the half-open breaker its own probe still holds.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, Crm, redis_store, reply, told
from scripted import BOB

import agentscope_harness.fleet as fleet
from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 1.5


def _worker(prefix: str, hooks=()) -> Harness:
    return Harness(HarnessConfig(store=redis_store(prefix),
                                 breaker_failures=1, breaker_cooldown_s=COOLDOWN_S, deadline_s=600,
                                 hook_timeout_s=30),
                   hooks=list(hooks), load_entry_points=False, environ={})


def _agent(h: Harness, dep: Crm, q: str) -> Agent:
    return Agent(name="desk", system_prompt="You help.",
                 model=ScriptedModel([calls(("crm", {"q": q})), text("done")]),
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(dep.crm, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False))


async def test_a_refused_spare_probe_reopens_a_breaker_another_worker_closed(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "PROBE_LEASE_S", 1.0)
    entered, verdict = asyncio.Event(), asyncio.Event()

    @harness_hook("pre_tool_call", priority=60, name="slow_policy_check", kind="safety")
    async def slow_policy_check(ctx) -> None:
        if ctx.tool.args.get("q") == "alice-slow":
            entered.set()
            await verdict.wait()  # an outside policy service deciding
            raise HookRejectSignal("Policy says no for this request; tell the user.", code="policy_refused")

    a, b = _worker(prefix, [slow_policy_check]), _worker(prefix)
    dep = Crm()
    await reply(a, _agent(a, dep, "first"))  # fails: the shared breaker opens
    assert dep.calls == ["first"]
    await asyncio.sleep(COOLDOWN_S * 2)
    dep.up = True

    alices = asyncio.ensure_future(reply(a, _agent(a, dep, "alice-slow")))  # claims the probe, then waits
    await asyncio.wait_for(entered.wait(), 10)
    await asyncio.sleep(1.5)  # the probe's store lease lapses (A never used it)
    bob1 = _agent(b, dep, "bob-1")
    await reply(b, bob1, BOB)  # B's probe runs and succeeds: closed
    assert "bob-1" in dep.calls, told(bob1)
    verdict.set()  # A's later gate refuses: A gives its spare "back"
    await alices
    await asyncio.sleep(0.2)  # A's background give-back lands (well within a cooldown)
    bob2 = _agent(b, dep, "bob-2")
    await reply(b, bob2, BOB)
    assert "bob-2" in dep.calls, (
        f"the CRM is up and B's probe closed the breaker; A's refused (never run) call reopened it: "
        f"Bob was told {told(bob2)}; CRM calls: {dep.calls}")

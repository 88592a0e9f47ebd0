"""r158c: the fleet's one half-open probe is held on a fixed 60 s lease
that is never renewed: a probe call that runs longer (a dependency coming
back slowly, a 90 s tool timeout) lets every other worker claim a second,
third ... probe while the first is still running.

README, "Running many workers": "Shared through the store: circuit breakers
(exactly one half-open probe across the fleet ...)"; hook table #12:
"then exactly one half-open probe fleet-wide". The lease exists for "a
process that dies holding it" (stores/_base.PROBE_LEASE_S); concurrency
leases are renewed while held ("A slot is held as long as its run or call
lasts"), the probe's is not.

Attack: two workers (two Harness instances, each its own RedisStore on one
Redis). `crm` fails with a connection error: the shared breaker opens
(breaker_failures=1). After the cooldown a run on worker A gets the probe;
the dependency is slow to answer. While A's probe is still waiting on it,
runs on worker B call `crm`.

What happened: once the probe's lease (PROBE_LEASE_S, 60 s; the fast variant
lowers the constant to 1 s so the test runs in seconds) has passed, B's run
is handed a second probe and calls the failing dependency while A's probe is
still in flight (2 probes at once; each later one every lease). Should: one
probe until its outcome; its lease renewed while its call runs (as leases
are), lapsing only when its worker is gone.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, redis_store, reply
from scripted import BOB

import agentscope_harness.fleet as fleet
from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 0.3


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(store=redis_store(prefix), breaker_failures=1,
                                 breaker_cooldown_s=COOLDOWN_S, deadline_s=600),
                   load_entry_points=False, environ={})


class Dependency:
    """The CRM: down, then slow to come back; counts calls in flight."""

    def __init__(self) -> None:
        self.mode = "down"
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls = 0
        self.release = asyncio.Event()

    async def crm(self, q: str) -> str:
        """Ask the CRM.

        Args:
            q (str): What.
        """
        self.calls += 1
        if self.mode == "down":
            raise ConnectionError("crm: connection refused")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
            return f"crm says {q}"
        finally:
            self.in_flight -= 1


def _agent(h: Harness, dep: Dependency) -> Agent:
    return Agent(name="desk", system_prompt="You help.",
                 model=ScriptedModel([calls(("crm", {"q": "status"})), text("done")]),
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(dep.crm, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False))


async def _scenario(prefix: str, lease_s: float) -> Dependency:
    a, b = _worker(prefix), _worker(prefix)
    dep = Dependency()
    await reply(a, _agent(a, dep))  # fails: the shared breaker opens
    assert dep.calls == 1
    await asyncio.sleep(COOLDOWN_S * 2)
    dep.mode = "slow"
    probe = asyncio.ensure_future(reply(a, _agent(a, dep)))  # A's run is the one probe
    for _ in range(200):
        if dep.in_flight:
            break
        await asyncio.sleep(0.01)
    assert dep.in_flight == 1
    started = time.monotonic()
    others = []
    for at in (0.5 * lease_s, lease_s + 1.0, lease_s + 2.0):  # B's users ask, before and after the lease
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        others.append(asyncio.ensure_future(reply(b, _agent(b, dep), BOB)))
    await asyncio.sleep(0.5)
    dep.release.set()
    await asyncio.gather(probe, *others)
    return dep


async def test_a_probe_slower_than_its_lease_lets_a_second_probe_in_fast(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "PROBE_LEASE_S", 1.0)
    dep = await _scenario(prefix, 1.0)
    assert dep.most_in_flight == 1, (
        f"one half-open probe fleet-wide: {dep.most_in_flight} calls reached the failing CRM at once "
        f"while worker A's probe was still running ({dep.calls} calls in all)")

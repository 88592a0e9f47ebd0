"""r158c: a call admitted before the shared breaker opened, failing late
(after the cooldown, while the half-open probe is out), re-opens the
breaker; the probe's success that follows is then ignored, and the tool,
back and answering, stays refused for another full cooldown fleet-wide.

README, hook table #12: "open after `breaker_failures` consecutive
dependency failures ..., refused as `dependency_down` for
`breaker_cooldown_s`, then exactly one half-open probe fleet-wide";
"Running many workers": "circuit breakers (exactly one half-open probe
across the fleet; a probe that fails on its own arguments closes the
breaker: the tool answered ...)". The store's own rule
(`_base.breaker_record_step`): "An open breaker ignores late outcomes of
calls admitted before it opened: only a probe closes it."

Attack: workers A and B share one store (breaker_failures=2). A's run X
calls `crm` while it is still closed; its request hangs. Two other runs'
calls fail fast: the breaker opens. After the cooldown, B's run P is the
probe: the CRM is back and P's call succeeds; but X's stale request times
out (ConnectionError) a moment before P's answer lands.

What happened: X's late failure, recorded while the breaker was half-open,
opened it again; P's success was then recorded on an open breaker and
ignored. The next run (on either worker) is refused "crm is unavailable
(it is failing)" although the one probe just proved the CRM answers.
Should: the half-open breaker decided by its probe alone (an outcome of a
call admitted before it opened ignored, half-open as when open).
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.message import ToolResultBlock
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, redis_store, reply
from scripted import BOB

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore, SQLiteStore
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 0.5


class Crm:
    def __init__(self) -> None:
        self.stale = asyncio.Event()   # X's hung request gives up
        self.answer = asyncio.Event()  # the probe's request answers
        self.ran: list[str] = []

    async def crm(self, q: str) -> str:
        """Ask the CRM.

        Args:
            q (str): What.
        """
        self.ran.append(q)
        if q == "stale":
            await self.stale.wait()
            raise ConnectionError("crm: connection reset")
        if q.startswith("fail"):
            raise ConnectionError("crm: connection refused")
        if q == "probe":
            await self.answer.wait()
        return f"crm says {q}"


def _agent(h: Harness, crm: Crm, q: str) -> Agent:
    return Agent(name="desk", system_prompt="You help.",
                 model=ScriptedModel([calls(("crm", {"q": q})), text("done")]),
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(crm.crm, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False))


def _results(agent: Agent) -> list[str]:
    return [str(b.output) for m in agent.state.context if not isinstance(m.content, str)
            for b in m.content if isinstance(b, ToolResultBlock)]


async def _scenario(backend: str, prefix: str, tmp_path, stale: bool) -> None:
    if backend == "redis":
        stores = redis_store(prefix), redis_store(prefix)
    elif backend == "sqlite":
        stores = SQLiteStore(str(tmp_path / "f.db")), SQLiteStore(str(tmp_path / "f.db"))
    else:
        one = MemoryStore()
        stores = one, one
    a, b = (Harness(HarnessConfig(store=s, breaker_failures=2, breaker_cooldown_s=COOLDOWN_S, deadline_s=60),
                    load_entry_points=False, environ={}) for s in stores)
    crm = Crm()
    x = asyncio.ensure_future(reply(a, _agent(a, crm, "stale" if stale else "fine")))  # admitted while closed
    await asyncio.sleep(0.2)
    await reply(a, _agent(a, crm, "fail-1"), BOB)
    await reply(b, _agent(b, crm, "fail-2"), BOB)  # two failures: open
    await asyncio.sleep(COOLDOWN_S * 2)
    p_agent = _agent(b, crm, "probe")
    p = asyncio.ensure_future(reply(b, p_agent, BOB))  # the one probe; the CRM is back
    for _ in range(300):
        if "probe" in crm.ran:
            break
        await asyncio.sleep(0.01)
    assert "probe" in crm.ran
    crm.stale.set()  # X's stale request gives up first
    await x
    crm.answer.set()  # then the probe's answer lands: the CRM is back
    await p
    assert any("crm says probe" in r for r in _results(p_agent))

    after = _agent(a, crm, "after")
    await reply(a, after, BOB)
    told = _results(after)
    assert "after" in crm.ran, (
        f"the probe succeeded (the CRM answers), yet the next call is refused: {told}; the breaker was "
        f"reopened by a call admitted before it opened, and the probe's success ignored")


@pytest.mark.parametrize("backend", ["redis", "sqlite", "memory"])
async def test_a_late_failure_of_a_call_admitted_before_the_breaker_opened_overrules_its_probe(
        backend: str, prefix: str, tmp_path) -> None:
    await _scenario(backend, prefix, tmp_path, stale=True)


async def test_control_the_probes_success_closes_the_breaker(prefix: str, tmp_path) -> None:
    await _scenario("redis", prefix, tmp_path, stale=False)

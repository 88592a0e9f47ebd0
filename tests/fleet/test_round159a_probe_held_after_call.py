"""r159a: the half-open probe stays held in the store (renewed every quarter
lease) after its call has ended, for as long as its RUN lasts, when the
probe's outcome never reaches `tool_breaker_record`: here a user's
post_tool_call safety hook placed before it (a DLP check, priority 1) that
withholds the probe's (successful) result. Every other worker's call of the
tool is refused "it is failing" with the service up, far past the probe's
lease; when the run finally closes the probe is "abandoned" and the breaker
opens for yet another cooldown although the probe succeeded.

README "Running many workers": circuit breakers "(exactly one half-open
probe across the fleet, held in the store while its call runs:
`breaker_renew` ... every 15 s of its 60 s lease ...; only the probe's
outcome decides a half-open breaker ...)". Before r158c the probe lapsed at
its lease whatever became of its outcome; now it is held while the RUN
lasts, not while the call runs.

Attack: workers A and B on one Redis, `crm` (breaker_failures=1). The breaker
opens; the CRM comes back; Alice's run on A probes `crm` (it succeeds, the
DLP hook withholds the result), then keeps working (a 4 s `report` tool).
PROBE_LEASE_S lowered to 1 s as r158c's test does (60 s in production: the
run holds it for its whole length, e.g. a 10-minute agentic run). 3 s after
the probe call returned (3 leases), Bob calls `crm` on B.
What happened: Bob is refused "crm is unavailable (it is failing)". Should:
the probe's call is over, so the probe is not held (its success, or at
worst its lapse, lets B's call run).
"""
from __future__ import annotations

import asyncio

import breaker_kit
import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.tool import FunctionTool, Toolkit
from breaker_kit import ALLOW, redis_store, reply, told
from scripted import BOB

import agentscope_harness.fleet as fleet
from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from agentscope_harness.testing import ScriptedModel, calls, text

COOLDOWN_S = 0.3


class Crm(breaker_kit.Crm):
    """Its answers carry a card number (the DLP hook withholds them); it writes reports too."""

    def __init__(self) -> None:
        super().__init__(says="crm says {q}: account 4111-1111-1111-1111")

    async def report(self, title: str) -> str:
        """Write a report (slow).

        Args:
            title (str): Title.
        """
        await asyncio.sleep(4.0)
        return f"report {title} written"


@harness_hook("post_tool_call", priority=1, name="dlp_check", kind="safety")
def dlp_check(ctx) -> None:
    if ctx.tool.name == "crm" and "4111-" in (ctx.result.text or ""):
        raise HookRejectSignal("The result held a card number and was withheld.", code="policy_refused")


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(store=redis_store(prefix),
                                 breaker_failures=1, breaker_cooldown_s=COOLDOWN_S, deadline_s=600),
                   hooks=[dlp_check], load_entry_points=False, environ={})


def _agent(h: Harness, dep: Crm, script) -> Agent:
    return Agent(name="desk", system_prompt="You help.", model=ScriptedModel(script),
                 toolkit=h.instrument(Toolkit(tools=[FunctionTool(dep.crm, permission=ALLOW),
                                                     FunctionTool(dep.report, permission=ALLOW)])),
                 middlewares=h.middlewares(), injection_config=InjectionConfig(enabled=False))


async def test_a_probe_whose_outcome_a_hook_withholds_is_held_while_its_run_lasts(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet, "PROBE_LEASE_S", 1.0)
    a, b = _worker(prefix), _worker(prefix)
    dep = Crm()
    await reply(a, _agent(a, dep, [calls(("crm", {"q": "first"})), text("sorry")]))  # the breaker opens
    assert dep.calls == ["first"]
    await asyncio.sleep(COOLDOWN_S * 2)
    dep.up = True

    alice = _agent(a, dep, [calls(("crm", {"q": "alice"})), calls(("report", {"title": "q3"})), text("done")])
    alices = asyncio.ensure_future(reply(a, alice))  # the one probe: it succeeds, its result is withheld
    await asyncio.wait_for(dep.answered.wait(), 10)  # the probe (Alice's) answered
    await asyncio.sleep(3.0)  # the probe's call is long over: 3 leases
    bob = _agent(b, dep, [calls(("crm", {"q": "bob"})), text("done")])
    await reply(b, bob, BOB)
    await alices
    assert "bob" in dep.calls, (
        f"the CRM is up and the probe's call ended 3 leases ago (it succeeded); Alice's run still "
        f"holds the probe: Bob on B was told {told(bob)}; CRM calls: {dep.calls}; "
        f"Alice read {told(alice)}")

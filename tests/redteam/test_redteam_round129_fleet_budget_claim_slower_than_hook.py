"""Round 129 c: a parked budget's claim that answers after `hook_timeout_s`
(but within the store's `timeout_s`) is dropped by the fail-open
`budget_router`, and the continued reply spends a fresh cap on top of the
parked one; the harness then claims again itself (a new token) and loses to
its own first claim.

README, "Ask a human" (budget park): "the next message continues the spent
budget on whichever worker it reaches ... Two replies that load one saved
state at once ... do not both spend it: the park is claimed in the store
... a store that cannot claim it (down) ends that reply `dependency_down`
and leaves the parked budget in the state"; `CostPolicy.cap_usd` is the
run's cap (`budget` when spent); `RedisStore` calls wait "within
`timeout_s`".

Attack: `CostPolicy(cap_usd=0.010, on_exhausted="ask")`, one RedisStore with
`timeout_s=5` and `hook_timeout_s=1` (a slow, far Redis; the defaults 2 s / 5 s
fail alike with a store given `timeout_s` over 5 s). Alice's reply spends the cap and parks
its budget (asks). She sends "go on" (no extension) while Redis answers 1.5 s
late: the claim in `budget_router` (pre_think, an observer: fails open)
outlives `hook_timeout_s`, so the hook is cut before it carries the
parked spend, and the model call is made against a fresh $0.010 cap; the next
round's `budget_router` claims again under a new token and is told "another
reply continued it", which none did.

What happened: the "go on" reply makes model calls as if nothing had been
spent, so the reply spends past the cap it was asked to extend. Should: the
parked budget carried (or the reply stopped `dependency_down`) whenever its
claim does not complete inside the hook, never a fresh cap."""

from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice
from agentscope_harness.stores import RedisStore
from tests.netkit import ReplyProxy
from tests.scripted import ALICE, ScriptedModel, calls, drain, make_agent, search, text, tool

pytestmark = pytest.mark.asyncio

PORT, DB = 6399, 1  # tests.scripted.REDIS_URL
URL = f"redis://127.0.0.1:{PORT}/{DB}"
CAP = 0.010
DELAY_S = 1.5



async def test_a_slow_budget_claim_does_not_open_a_fresh_cap(redis_prefix: str) -> None:
    proxy = ReplyProxy(PORT)
    h = Harness(HarnessConfig(
        store=RedisStore(f"redis://127.0.0.1:{await proxy.start()}/{DB}", prefix=redis_prefix, timeout_s=5.0),
        hook_timeout_s=1.0,
        cost=CostPolicy(cap_usd=CAP, on_exhausted="ask", prices={"scripted": ModelPrice(1.0, 1.0)}),
    ), load_entry_points=False, environ={})
    script = [calls(("search", {"q": "a"}), inp=4000), calls(("search", {"q": "b"}), inp=5600),
              *[calls(("search", {"q": q}), inp=1500) for q in "cdefghijklm"], text("done")]
    model = ScriptedModel(script)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(), name="research")
    try:
        with h.acting_for(ALICE):
            await drain(agent, UserMsg("user", "research the market"))
        first = h.last_report(agent)
        assert first.spent_usd <= CAP + 1e-9, (first.terminal_state.value, first.reason, first.spent_usd)
        await h.config.store.park_get("warm")  # a connection is open (no handshake under the delay)
        before = len(model.calls)
        proxy.delay_s = DELAY_S  # Redis answers late: within timeout_s=5, past hook_timeout_s=1
        with h.acting_for(ALICE):
            await drain(agent, UserMsg("user", "go on"))
        second = h.last_report(agent)
        proxy.delay_s = 0.0
        carried = [d.detail for d in second.decisions if d.action in ("continue_budget", "error")]
        # the parked spend is carried: the reply ends on the budget it continues after a call at most
        # (one the scripted usage makes dearer than its estimate), never with a fresh cap's calls
        assert len(model.calls) - before <= 1 and second.terminal_state.value != "completed", (
            f"cap ${CAP}: ${first.spent_usd:.4f} spent before the park, then ${second.spent_usd:.4f} more in the "
            f"'go on' reply ({len(model.calls) - before} model calls, ${first.spent_usd + second.spent_usd:.4f} in all, ended {second.terminal_state.value} "
            f"{second.reason}); budget decisions: {carried}")
    finally:
        proxy.delay_s = 0.0
        await proxy.close()

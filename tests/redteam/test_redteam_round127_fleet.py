"""Round 127 d (the fleet on one Redis). Two findings.

1. A reply parked on worker A and resumed on worker B
while B cannot reach the shared Redis goes on, for whoever resumed it, with
its counts started again from zero (fail open).

README, "Security" / "Human in the loop": "resumed by another caller than the
one who parked it, or by nobody, it acts for nobody (`refused:permission_denied`)
... a park whose record can no longer be read (expired after `PARK_TTL_S`,
lost, or the store not answering) acts for nobody, here too ... A park is
answered once (`ParkRecords.park_claim`, atomic in the store, in one process
or many) ... a store that cannot claim it (down) leaves the resume acting for
nobody (fail closed, as budgets)." and "it goes on from exactly where it was
... call and token counts, spend ...".

Attack: Alice's reply (max_model_calls=3) makes 2 model calls and parks on a
`pay_out` approval on worker A (RedisStore, record written). Worker B (same
Redis, same prefix) is partitioned from Redis (its store does not answer).
Its restored copy of the agent gets the confirmation. `_restored` reads the
park record: UNANSWERED is treated as "no record kept", so `park_id` stays
None, `_claimed` returns True without asking the store, and the run is
merely `resume_unverified`.

What happened: with Bob's request, B resumes Alice's parked reply acting for
Bob (report principal u-7), makes 3 more model calls (the cap of 3 started
again from zero: 5 in all) and runs 3 more tools on Bob's behalf. With
Alice's own answer reaching both A (which claims it) and B, both workers go
on with the same run. Should: the store not answering at the resume -> acts
for nobody, no model call, no tool (as `_Kept.GONE` does for a park held
locally).

2. A worker whose clock is off keeps its own day of
the daily quota on a shared Redis, so a principal's quota is spent twice.

README, "Running many workers": "Give every worker the same `HarnessConfig`
and one shared store: `RedisStore(url)` for many hosts ... Shared through the
store: the daily spend and its per-call reservations ... Concurrent runs never
spend past the quota as long as a call costs no more than its estimate."
DESIGN 6.6: "N processes on M hosts behind one Redis behave as one harness."
`stores/redis.py`: "The scripts read the clock with `TIME` on the server: all
hosts share one clock".

Attack: two workers share one Redis (same prefix). Worker B's host clock runs
3 days behind (a VM restored from a snapshot, NTP off). Alice spends her
$2.00 `daily_quota_usd` on worker A until the next call no longer fits; her
next request reaches worker B.

What happened: the day a spend is kept under is the worker's own
(`_base.today()` on the worker, passed into the key
`{prefix}:spend:{day}:{key}` and the reservation id), not the server's:
worker B reserves against a day nobody spent on (its key expired after
`ttl_days`) and admits a second full quota: $1.60 more, every call
estimates fitting, the same moment on the server's clock ($3.20 against
$2.00). A worker 3+ days behind does so every day. Should: the day read
where every other shared decision reads the clock (Redis `TIME` in the
reserve script; settle by the day the reservation names), so one principal
has one quota per server day whatever a worker's clock says."""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState

import agentscope_harness.stores.redis as redis_store
from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState, ToolPolicy
from agentscope_harness.stores import RedisStore
from tests.scripted import ALICE, BOB, ScriptedModel, calls, confirm, drain, make_agent, redis_url, text

pytestmark = pytest.mark.asyncio
RAN: list[str] = []


async def pay_out(account: str, amount: float) -> str:
    """Pay out money.

    Args:
        account (str): Whose account.
        amount (float): USD.
    """
    RAN.append(f"pay_out:{account}:{amount}")
    return f"paid {amount} to {account}"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    RAN.append(f"lookup:{q}")
    return f"found {q}"


def _unreachable() -> str:
    """Worker B's view of the same Redis during a partition: nothing answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"redis://127.0.0.1:{port}/1"


def _park_worker(url: str, prefix: str) -> Harness:
    return Harness(HarnessConfig(
        store=RedisStore(url, prefix=prefix, timeout_s=0.5), max_model_calls=3,
        tools={"pay_out": ToolPolicy(role="mutation",
                                     ask_when=lambda a: "payouts over $100 need a human" if a["amount"] > 100 else None)},
    ), load_entry_points=False, environ={})


async def _parked_on_a(prefix: str) -> tuple[Harness, Any, ScriptedModel, RequireUserConfirmEvent]:
    RAN.clear()
    a = _park_worker(redis_url(), prefix)
    model = ScriptedModel([calls(("lookup", {"q": "account"})),
                           calls(("pay_out", {"account": "alice-acct", "amount": 500.0})),
                           *[calls(("lookup", {"q": f"more-{i}"})) for i in range(6)], text("done")])
    agent = make_agent(model, [pay_out, lookup], a.middlewares())
    with a.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "pay 500 out of my account"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    parked = a.last_report(agent)
    assert parked.terminal_state is TerminalState.WAITING_INPUT and parked.model_calls == 2
    return a, agent, model, ask


def _on_b(agent: Any, model: ScriptedModel, prefix: str) -> tuple[Harness, Any]:
    b = _park_worker(_unreachable(), prefix)
    state = AgentState.model_validate_json(agent.state.model_dump_json())
    return b, make_agent(model, [pay_out, lookup], b.middlewares(), state=state)


async def test_another_callers_resume_while_the_store_is_down_acts_for_nobody() -> None:
    prefix = f"rt127d{uuid.uuid4().hex[:8]}"
    _, agent, model, ask = await _parked_on_a(prefix)
    b, there = _on_b(agent, model, prefix)
    before, ran_before = len(model.calls), list(RAN)
    with b.acting_for(BOB):
        await drain(there, confirm(ask, ask.tool_calls[0]))
    report = b.last_report(there)
    made, ran = len(model.calls) - before, RAN[len(ran_before):]
    assert (report.reason, made, ran) == ("refused:permission_denied", 0, []), (
        f"Bob's resume of Alice's park with the store down went on for {report.principal}: "
        f"{made} model calls, tools run {ran}, ended {report.reason}"
    )


async def test_a_resume_while_the_store_is_down_does_not_restart_the_runs_counts() -> None:
    prefix = f"rt127d{uuid.uuid4().hex[:8]}"
    a, agent, model, ask = await _parked_on_a(prefix)
    b, there = _on_b(agent, model, prefix)
    with a.acting_for(ALICE):  # A takes the answer (it claims the park) and pays out
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    assert "pay_out:alice-acct:500.0" in RAN
    before = len(model.calls)
    with b.acting_for(ALICE):  # the same answer reaches B too (a retry, a double click)
        await drain(there, confirm(ask, ask.tool_calls[0]))
    made_on_b = len(model.calls) - before
    # max_model_calls=3, two made before the park: one more at most, anywhere; none on B (down)
    assert made_on_b == 0, (
        f"the run A resumed went on on worker B too; B, unable to reach the store, resumed the parked run with its counts from zero: "
        f"{made_on_b} more model calls ({2 + made_on_b} against max_model_calls=3)"
    )


PRICES = {"scripted": ModelPrice(100.0, 100.0)}
QUOTA = 2.0


def _worker(prefix: str) -> Harness:
    return Harness(HarnessConfig(store=RedisStore(redis_url(), prefix=prefix),
                                 cost=CostPolicy(daily_quota_usd=QUOTA, prices=PRICES)),
                   load_entry_points=False, environ={})


def _model() -> ScriptedModel:
    return ScriptedModel([*[calls(("lookup", {"q": str(i)}), inp=1000, out=3000) for i in range(20)], text("done")])


async def test_a_worker_with_a_skewed_clock_does_not_open_a_second_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = f"rt127d{uuid.uuid4().hex[:8]}"
    a, b = _worker(prefix), _worker(prefix)

    first = make_agent(_model(), [lookup], a.middlewares())
    with a.acting_for(ALICE):
        await drain(first, UserMsg("user", "research"))
    on_a = a.last_report(first)
    assert on_a.reason == "budget" and on_a.spent_usd > 0.75 * QUOTA  # the quota is (nearly) spent

    # worker B's host clock is 3 days behind: what `today()` reads on that host
    behind = time.time() - 3 * 86400
    monkeypatch.setattr(redis_store, "_wall", lambda: time.time() - 3 * 86400, raising=False)
    # the same host clock as the code before the fix read it (its own `today()`)
    monkeypatch.setattr(redis_store, "today", lambda: time.strftime("%Y-%m-%d", time.gmtime(behind)), raising=False)
    second = make_agent(_model(), [lookup], b.middlewares())
    with b.acting_for(ALICE):
        await drain(second, UserMsg("user", "research more"))
    on_b = b.last_report(second)
    total = on_a.spent_usd + on_b.spent_usd
    assert total <= QUOTA + 1e-9, (
        f"Alice's daily quota is ${QUOTA:.2f}: ${on_a.spent_usd:.2f} on worker A, then ${on_b.spent_usd:.2f} "
        f"more on worker B (clock 3 days behind, {on_b.model_calls} model calls) = ${total:.2f}"
    )

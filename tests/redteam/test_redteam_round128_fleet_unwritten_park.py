"""Round 128 c: a park whose record was never written (the store down at
the park) is answered twice: on the parking worker, and again on another.

README, "Security" / "Human in the loop": "A park is answered once
(`ParkRecords.park_claim`, atomic in the store, in one process or many): the
same answer reaching two workers at once (a double click, a retry) ...
resumes one run, and the other acts for nobody"; "a record never written, the
store down when the reply parked, leaves the park this process's: answered
here once, claimed"; and (round 127) a resume in another process whose
store cannot say "who parked the run, what it spent and whether its answer
was used" acts for nobody.

Attack: Alice's reply (max_model_calls=3) makes 2 model calls and parks on
a `pay_out` approval on worker A while A's link to the shared Redis is cut
(the record is not written; A keeps the park as its own, with a park id
only A knows). The link comes back. Alice's approval reaches A and, a double
click, worker B (same Redis, same prefix, the state from storage).

What happened: A claims the park under its id and pays out. B finds no
record, so no park id: `_claimed` answers True without asking the store,
and B goes on as a `resume_unverified` run with its counts from zero: more
model calls (past max_model_calls=3 for the run) and more tools, the same
answer used twice. Should: the park's claim key travel with the state
(e.g. the park id in `middle_context`, as parked budgets do), so B's claim
of the same park loses; or, a store that keeps records but holds none for a
reply whose state says it parked under an id, act for nobody."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.stores import RedisStore
from tests.netkit import ReplyProxy
from tests.scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text

pytestmark = pytest.mark.asyncio

PORT, DB = 6399, 1  # tests.scripted.REDIS_URL
URL = f"redis://127.0.0.1:{PORT}/{DB}"
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


def _worker(url: str, prefix: str) -> Harness:
    return Harness(HarnessConfig(
        store=RedisStore(url, prefix=prefix, timeout_s=0.5), max_model_calls=3,
        tools={"pay_out": ToolPolicy(role="mutation",
                                     ask_when=lambda a: "payouts over $100 need a human" if a["amount"] > 100 else None)},
    ), load_entry_points=False, environ={})


async def test_a_park_never_recorded_is_answered_once_across_workers(redis_prefix: str) -> None:
    RAN.clear()
    proxy = ReplyProxy(PORT)
    a = _worker(f"redis://127.0.0.1:{await proxy.start()}/{DB}", redis_prefix)
    model = ScriptedModel([calls(("lookup", {"q": "account"})),
                           calls(("pay_out", {"account": "alice-acct", "amount": 500.0})),
                           *[calls(("lookup", {"q": f"more-{i}"})) for i in range(6)], text("done")])
    agent = make_agent(model, [pay_out, lookup], a.middlewares())
    try:
        proxy.down()  # A cannot reach Redis while the reply parks: its record is not written
        with a.acting_for(ALICE):
            items = await drain(agent, UserMsg("user", "pay 500 out of my account"))
        ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
        parked = a.last_report(agent)
        assert parked.terminal_state is TerminalState.WAITING_INPUT and parked.model_calls == 2
        proxy.up()

        b = _worker(URL, redis_prefix)
        state = AgentState.model_validate_json(agent.state.model_dump_json())
        there: Any = make_agent(model, [pay_out, lookup], b.middlewares(), state=state)

        with a.acting_for(ALICE):  # A takes the answer (it claims the park) and pays out
            await drain(agent, confirm(ask, ask.tool_calls[0]))
        on_a = a.last_report(agent)
        assert "pay_out:alice-acct:500.0" in RAN, (on_a.terminal_state, on_a.reason)
        before, ran_before = len(model.calls), len(RAN)
        with b.acting_for(ALICE):  # the same answer reaches B too (a double click)
            await drain(there, confirm(ask, ask.tool_calls[0]))
        on_b = b.last_report(there)
        made_on_b, ran_on_b = len(model.calls) - before, RAN[ran_before:]
        assert (made_on_b, ran_on_b) == (0, []), (
            f"one park, answered on A (pay_out ran, {on_a.model_calls} model calls in all there) and again on B: "
            f"{made_on_b} more model calls, tools {ran_on_b}, ended {on_b.reason} "
            f"(model calls {on_b.model_calls} by B's count against max_model_calls=3)"
        )
    finally:
        await proxy.close()

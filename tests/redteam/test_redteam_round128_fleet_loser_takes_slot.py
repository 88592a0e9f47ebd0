"""Round 128 c: the losing resume of a double click takes the principal's
one run slot, so the winner, which took the park's one answer, ends
`concurrency_limited` without running the approved call: the one answer is
used up and nobody pays out.

README, "Security" / "Human in the loop": "A park is answered once ...: the
same answer reaching two workers at once (a double click, a retry) ...
resumes one run, and the other acts for nobody"; "Running many workers": "A
resumed run takes a slot again, on whichever worker the answer reaches, and
with none free it ends `incomplete` (`concurrency_limited`) without running
the call it parked." A run acting for nobody "ends at its next step ...
without a model call": it is no work in flight.

Attack: `ConcurrencyLimit(scope="principal", max_in_flight=1)`. Alice's reply
parks on a `pay_out` approval on worker A (record written, slot given back).
Her approval reaches A and, a double click, worker B (A's replies from
Redis 2 s late, B's 1 s, B's copy 1.5 s later: A's claim lands first, B's
lease lands first).

What happened: A claims the park; B's claim loses, B acts for nobody, yet
`Fleet.open_run` still takes Alice's slot for it (resume: it is called
whatever the resume decided); A's lease finds it taken and A ends
`concurrency_limited`, not running pay_out (its one answer spent on a
run that never ran). Should: a resume that acts for nobody takes no
run slot (skip `open_run` when the resume ended it), or the claim be taken
after the slot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.stores import RedisStore
from tests.netkit import ReplyProxy
from tests.scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text

pytestmark = pytest.mark.asyncio

PORT, DB = 6399, 1  # tests.scripted.REDIS_URL
RAN: list[str] = []


async def pay_out(account: str, amount: float) -> str:
    """Pay out money.

    Args:
        account (str): Whose account.
        amount (float): USD.
    """
    RAN.append(f"pay_out:{account}:{amount}")
    return f"paid {amount} to {account}"


def _worker(port: int, prefix: str) -> Harness:
    return Harness(HarnessConfig(
        store=RedisStore(f"redis://127.0.0.1:{port}/{DB}", prefix=prefix, timeout_s=8.0),
        concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=30)],
        tools={"pay_out": ToolPolicy(role="mutation",
                                     ask_when=lambda a: "payouts over $100 need a human" if a["amount"] > 100 else None)},
    ), load_entry_points=False, environ={})


async def test_the_losing_resume_of_a_double_click_takes_no_slot_from_the_winner(redis_prefix: str) -> None:
    RAN.clear()
    pa, pb = ReplyProxy(PORT), ReplyProxy(PORT)
    a, b = _worker(await pa.start(), redis_prefix), _worker(await pb.start(), redis_prefix)
    model = ScriptedModel([calls(("pay_out", {"account": "alice-acct", "amount": 500.0})),
                           text("paid"), text("paid"), text("paid")])
    agent = make_agent(model, [pay_out], a.middlewares())
    try:
        with a.acting_for(ALICE):
            items = await drain(agent, UserMsg("user", "pay 500 out of my account"))
        ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
        assert a.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
        state = AgentState.model_validate_json(agent.state.model_dump_json())
        there: Any = make_agent(model, [pay_out], b.middlewares(), state=state)
        for h in (a, b):  # each pool holds a connection already (no handshake under the delay)
            await h.config.store.park_get("warm")

        pa.delay_s, pb.delay_s = 2.0, 1.0

        async def on_a() -> None:
            with a.acting_for(ALICE):
                await drain(agent, confirm(ask, ask.tool_calls[0]))

        async def on_b() -> None:
            await asyncio.sleep(1.5)
            with b.acting_for(ALICE):
                await drain(there, confirm(ask, ask.tool_calls[0]))

        await asyncio.gather(on_a(), on_b())
        ra, rb = a.last_report(agent), b.last_report(there)
        assert RAN == ["pay_out:alice-acct:500.0"], (
            f"Alice approved once (double click): A ended {ra.reason}, B ended {rb.reason}; "
            f"tools run: {RAN}: the answer was used up and no worker paid out"
        )
    finally:
        pa.delay_s = pb.delay_s = 0.0
        await pa.close()
        await pb.close()

"""Round 128 c: a park's claim resent after a dropped connection (the first
SET NX ran on the server) finds its own claim and loses to it: the only
resume of the park acts for nobody, its report saying the park was
"answered already", though nobody else ever answered it.

README, "Security" / "Human in the loop": "A park is answered once
(`ParkRecords.park_claim`, atomic in the store, in one process or many)";
"it goes on from exactly where it was". `RedisStore` docstring: "A command
that fails on a dropped connection is sent once more; ... a lease or a
reservation is taken once (its id is the client's: a resend finds it)."

Attack: Alice's reply parks on a `pay_out` approval on worker A (record
written). Alice approves, on A itself (no second worker, no double click).
The connection drops as the server's answer to `SET {prefix}:claimed:<park>
1 NX` arrives; redis-py's `Retry` sends it again, and the second SET NX
finds the key the first one set.

What happened: `park_claim` answers False, `_claimed` reads that as
another resume having taken the answer: the run ends
`refused:permission_denied` ("answered already"), pay_out never runs, the
user gets the fallback. Should: the claim tell its own resend apart (a
value unique to the claim, `SET NX GET` or a script comparing it), as a
lease's id does."""

from __future__ import annotations

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
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


async def test_a_claim_resent_after_a_dropped_reply_is_still_this_resumes(redis_prefix: str) -> None:
    RAN.clear()
    proxy = ReplyProxy(PORT)
    proxy.drop_after(f"{redis_prefix}:claimed:".encode())
    store = RedisStore(f"redis://127.0.0.1:{await proxy.start()}/{DB}", prefix=redis_prefix, timeout_s=2.0)
    a = Harness(HarnessConfig(
        store=store,
        tools={"pay_out": ToolPolicy(role="mutation",
                                     ask_when=lambda x: "payouts over $100 need a human" if x["amount"] > 100 else None)},
    ), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("pay_out", {"account": "alice-acct", "amount": 500.0})),
                                      text("paid")]), [pay_out], a.middlewares())
    try:
        with a.acting_for(ALICE):
            items = await drain(agent, UserMsg("user", "pay 500 out of my account"))
        ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
        assert a.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
        with a.acting_for(ALICE):
            await drain(agent, confirm(ask, ask.tool_calls[0]))
        report = a.last_report(agent)
        assert proxy.dropped == 1
        details = [d.detail for d in report.decisions if d.code == "permission_denied"]
        assert RAN == ["pay_out:alice-acct:500.0"], (
            f"Alice's one approval, on the worker that parked it: ended {report.reason} {details}; "
            f"tools run: {RAN} (the claim's resend found the claim its first send made)"
        )
    finally:
        await store.aclose()
        await proxy.close()

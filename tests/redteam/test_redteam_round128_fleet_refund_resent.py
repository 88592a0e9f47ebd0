"""Round 128 c: a rate unit given back over a connection that drops after
the server ran the give-back is given back twice (the resend), so a unit
another call used is forgotten and the tool runs past its rate limit.

README, "Running many workers": "`rate_limits` (GCRA: model or tool calls per
minute ...; a tool call that took its unit and then did not run, refused by a
later gate, parked for a human, ... gives back what is left of the unit's
window: `rate_refund` ...)". `RedisStore` docstring: "A command that fails on
a dropped connection is sent once more; should the first one have run, a
charge over-counts (charged twice), never under-counts".

Attack: `pay` is limited to 2 calls a minute per principal. Alice's reply
pays $50 (runs: one unit), then asks to pay $500, which `ask_when` parks for
a human (its unit is given back: `RATE_REFUND`). The connection drops as the
server's answer to that refund arrives (tests/netkit.py's ReplyProxy, armed
by the refund's EVALSHA); redis-py's `Retry` sends the script once more, and
it runs again: two units given back for one.

What happened: the $50 call's unit is forgotten; Alice's next reply runs
`pay` twice more in the same minute: 3 pays against calls_per_min=2.
Should: a give-back applied once (an id per refund, kept as settles keep
theirs; or RATE_REFUND not resent: `Retry` off for it, the unit left to lapse)."""

from __future__ import annotations

import asyncio

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg

import agentscope_harness.stores.redis as redis_store
from agentscope_harness import Harness, HarnessConfig, RateLimit, ToolPolicy
from agentscope_harness.stores import RedisStore
from tests.netkit import ReplyProxy, sha
from tests.scripted import ALICE, ScriptedModel, calls, drain, make_agent, text

pytestmark = pytest.mark.asyncio

PORT, DB = 6399, 1  # tests.scripted.REDIS_URL
PAID: list[float] = []


async def pay(account: str, amount: float) -> str:
    """Pay money out.

    Args:
        account (str): To whom.
        amount (float): USD.
    """
    PAID.append(amount)
    return f"paid {amount} to {account}"


async def test_a_give_back_resent_after_a_dropped_reply_does_not_free_a_used_unit(redis_prefix: str) -> None:
    PAID.clear()
    proxy = ReplyProxy(PORT)
    proxy.drop_after(sha(redis_store.RATE_REFUND))
    store = RedisStore(f"redis://127.0.0.1:{await proxy.start()}/{DB}", prefix=redis_prefix, timeout_s=2.0)
    h = Harness(HarnessConfig(
        store=store,
        rate_limits=[RateLimit(scope="principal", tool="pay", calls_per_min=2)],
        tools={"pay": ToolPolicy(role="mutation",
                                 ask_when=lambda a: "payouts over $100 need a human" if a["amount"] > 100 else None)},
    ), load_entry_points=False, environ={})
    try:
        first = make_agent(ScriptedModel([
            calls(("pay", {"account": "bob", "amount": 50.0})),
            calls(("pay", {"account": "carol", "amount": 500.0})),
            text("unused"),
        ]), [pay], h.middlewares())
        with h.acting_for(ALICE):
            items = await drain(first, UserMsg("user", "pay bob 50 and carol 500"))
        assert any(isinstance(i, RequireUserConfirmEvent) for i in items)  # the $500 call parked
        await asyncio.sleep(0.5)  # its unit given back (in the background), the resend included
        assert PAID == [50.0] and proxy.dropped == 1

        second = make_agent(ScriptedModel([
            calls(("pay", {"account": "dave", "amount": 10.0})),
            calls(("pay", {"account": "erin", "amount": 20.0})),
            text("done"),
        ]), [pay], h.middlewares())
        with h.acting_for(ALICE):
            await drain(second, UserMsg("user", "pay dave 10 and erin 20"))
        assert len(PAID) <= 2, (
            f"pay is limited to 2 calls a minute; within one minute it ran {len(PAID)} times ({PAID}): "
            f"the give-back of the parked call was applied twice (resent after the dropped reply), "
            f"freeing the unit the $50 call used"
        )
    finally:
        await store.aclose()
        await proxy.close()

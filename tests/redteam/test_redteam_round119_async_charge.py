"""A user's safety gate whose ``ctx.admit`` charge is a coroutine function.

README "Writing a hook": "Hooks may be sync or async" and "``ctx.admit(charge)``
(a charge made only once every gate passed; it may return an undo callable,
called when a later gate's charge refuses)"; "a verb used where nothing acts on
it fails the hook, loudly, ... rather than being dropped or reported as done";
"any other value is the hook's failure, never silently dropped"; a safety hook
fails closed.

An ``async def`` charge (natural for a limit kept in a store: it re-checks and
charges over the network) is called, its coroutine taken for "a value with
nothing to undo" and never awaited: the re-check that would refuse never runs,
the call is admitted, nothing is recorded. The user's cap of one refund per
conversation lets every refund through.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDS: list[str] = []
USED = {"n": 0}


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDS.append(order_id)
    return f"refunded {order_id}"


@harness_hook("pre_tool_call", priority=25, name="one_refund", kind="safety")
def one_refund(ctx) -> None:
    if ctx.tool.name != "refund":
        return

    async def charge() -> None:  # re-check and charge, e.g. against a shared store
        if USED["n"] >= 1:
            raise HookRejectSignal("Only one refund per conversation.", code="quota_exhausted")
        USED["n"] += 1

    ctx.admit(charge)


async def test_async_charge_is_not_silently_dropped() -> None:
    REFUNDS.clear()
    USED["n"] = 0
    h = Harness(HarnessConfig(), hooks=[one_refund], load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("refund", {"order_id": "A-2"})),
                           calls(("refund", {"order_id": "A-3"})), text("done")])
    agent = make_agent(model, [tool(refund)], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    mine = [d for d in report.decisions if d.hook == "one_refund"]
    # either the charge is awaited (one refund, two refused) or the safety hook
    # fails loudly and closed (no refund, each failure reported): never
    # "charged" with nothing charged and every refund made
    assert len(REFUNDS) <= 1, (REFUNDS, USED, [(d.action, d.code, d.detail) for d in mine])
    assert USED["n"] == len(REFUNDS) or any(d.action == "error" for d in mine)

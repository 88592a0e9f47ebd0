"""Round 109 (a). A remembered approval covers a call after it expired, or
after ``harness.revoke`` forgot it, when its ``when`` is async (the README
allows "``when`` (sync or async)").

``ApprovalBook.covers`` picks the live grants (``expires_at > now``) and the
grant list *before* awaiting ``when``; neither the clock nor a revoke is
looked at again once ``when`` answers. So a ``when`` that reads a database
(here: 0.3 s) lets a call run without asking a human although the approval
expired (``ttl_s=0.1``), or was revoked, while it was being read: the
decision ``allow_remembered`` is recorded after its end.

README ("Ask a human"): "``harness.approve(principal, session_id, "refund",
when=..., ttl_s=600)`` lets matching calls run without asking, for that
principal and session only, until it expires (``allow_remembered``);
``harness.revoke(...)`` forgets it. ``when`` (sync or async) is bounded as
``ask_when`` is"."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

ALICE = Principal(user_id="alice", tenant="acme")
RAN: list[str] = []


async def refund(order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (float): USD.
    """
    RAN.append(f"refund:{order_id}:{amount}")
    return f"refunded {amount} on {order_id}"


def shop() -> Harness:
    return Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", ask_when=lambda a: "refunds over $50 need a human" if a["amount"] > 50 else None,
    )}), load_entry_points=False, environ={})


async def under_100_slowly(args: dict[str, Any]) -> bool:
    await asyncio.sleep(0.3)  # e.g. the approval's limit read from a database
    return args["amount"] < 100


def agent_of(h: Harness) -> Any:
    model = ScriptedModel([calls(("refund", {"order_id": "o-1", "amount": 80.0})), text("done")])
    return make_agent(model, [refund], h.middlewares())


async def test_an_approval_that_expired_while_when_was_read_does_not_cover_the_call() -> None:
    RAN.clear()
    h = shop()
    agent = agent_of(h)
    h.approve(ALICE, agent.state.session_id, "refund", when=under_100_slowly, ttl_s=0.1)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund o-1")
    report = h.last_report(agent)
    # the approval expired 0.1 s in; the call was let through at 0.3 s
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events), (RAN, report.decisions)
    assert RAN == []
    assert report.terminal_state is TerminalState.WAITING_INPUT


async def test_an_approval_revoked_while_when_was_read_does_not_cover_the_call() -> None:
    RAN.clear()
    h = shop()
    agent = agent_of(h)
    h.approve(ALICE, agent.state.session_id, "refund", when=under_100_slowly, ttl_s=600)

    async def revoke_soon() -> None:
        await asyncio.sleep(0.1)
        h.revoke(ALICE, agent.state.session_id, "refund")  # the user withdraws "always allow"

    with h.acting_for(ALICE):
        revoking = asyncio.ensure_future(revoke_soon())
        events, _ = await run(agent, "refund o-1")
        await revoking
    report = h.last_report(agent)
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events), (RAN, report.decisions)
    assert RAN == []

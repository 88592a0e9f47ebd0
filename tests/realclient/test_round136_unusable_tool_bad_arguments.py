"""Round 136 b (scenarios from a user's side, README "Security"): a call refused for its
arguments to a tool the caller cannot use whatever its arguments (not in
`allowed_tools`; identity-bound with no principal, or one without the attribute) answers
`permission_denied` at once, never how to call it again, and counts as the refusal it
is (the ladder ends a model that ignores it). AgentScope's real OpenAIChatModel against
tests/realclient/server.py."""

from __future__ import annotations

import json

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import make_agent, tool
from server import Reply
from side_kit import model as real_model

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy

RAN: list = []


@pytest.fixture(autouse=True)
def _clear():
    RAN.clear()


def agent_with(h: Harness, server, tools: list):
    return make_agent(real_model(server, "gpt-test"), h.instrument(Toolkit(tools=[tool(t) for t in tools])), h.middlewares())


async def drive(agent, prompt: str) -> None:
    async for _ in agent.reply_stream(UserMsg("user", prompt)):
        pass


async def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(("lookup", order_id))
    return f"order {order_id}: paid"


async def cancel(order_id: str, region: str = "eu") -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        region (str): Its region.
    """
    RAN.append(("cancel", order_id))
    return "cancelled"


async def test_forbidden_tool_with_bad_arguments_is_a_counted_refusal(server):
    """README Security, "Every call is gated": "A call refused for its arguments to a
    tool the principal may not use answers `permission_denied`"; DESIGN §3.1:
    `RunReport.refusals` counts refusals by code; README intro: "an ignored
    `permission_denied` [ends the run] in 3-4" model calls, the ladder ending it
    `incomplete`, reason `refused:permission_denied`.

    Attack: a principal whose `allowed_tools` lacks `cancel`; the model calls `cancel`
    with arguments AgentScope's schema rejects (`region: 5`, no `order_id`), and keeps
    doing so, ignoring the sentinel.

    Happened: the model is told `[harness:permission_denied] cancel is not available`
    each round, but the report counts no refusal (`refusals == {}`, the decision is an
    `argument_guide` "rewrite"), the ladder never sees it: the run goes 8 model calls and
    ends `stalled`. The same model with well-formed arguments is stopped in 3 calls,
    `refused:permission_denied`, `refusals == {"permission_denied": 2, ...}`."""
    server.plan(*[Reply(tool_calls=[("cancel", {"region": 5})]) for _ in range(15)], Reply(text="sorry"))
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = agent_with(h, server, [lookup, cancel])
    with h.acting_for(Principal(user_id="u-42", tenant="acme", allowed_tools={"lookup"})):
        await drive(agent, "cancel my order")
    told = json.dumps(server.requests[1]["messages"][-1])
    assert "[harness:permission_denied]" in told  # what the model was told
    assert RAN == []
    rep = h.last_report(agent)
    assert rep.refusals.get("permission_denied", 0) >= 1, (rep.refusals, [(d.hook, d.action, d.code) for d in rep.decisions])
    assert rep.terminal_state == TerminalState.INCOMPLETE
    assert rep.reason == "refused:permission_denied", (rep.reason, len(server.requests))
    assert len(server.requests) <= 4, len(server.requests)


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(("lookup_order", order_id, user_id))
    return f"order {order_id}: paid"


async def account_op(order_id: str, account: str) -> str:
    """Act on an account.

    Args:
        order_id (str): The order.
        account (str): The account.
    """
    RAN.append(("account_op", order_id, account))
    return "done"


@pytest.mark.parametrize("case", ["no principal bound", "principal without the identity attribute"])
async def test_bad_arguments_to_an_identity_tool_nobody_here_may_use_offer_no_retry(server, case):
    """README Security, "Identity": "No principal bound: identity-bound tools are
    refused"; "Every call is gated": "A call refused for its arguments to a tool the
    principal may not use answers `permission_denied`, never how to call it again."

    Attack: no principal bound (or a principal lacking the attribute the tool's
    `identity_args` names); the model calls the identity-bound tool with arguments
    AgentScope's schema rejects, then follows the harness's guidance.

    Happened: the model is told `[harness:bad_arguments] ... Call it again with
    {"order_id": <string>, "user_id": <string>}`, an offer of a call that can never run
    here; it spends a round doing so and is then refused `permission_denied`. Expected:
    `permission_denied` at once, no argument list (as for a tool outside
    `allowed_tools`, which `arguments._guide` already handles)."""
    if case == "no principal bound":
        cfg = HarnessConfig(tools={"lookup_order": ToolPolicy(identity_args={"user_id": "user_id"})})
        tool, bad, good, who = lookup_order, {"order_id": 7}, {"order_id": "7", "user_id": "u-1"}, None
    else:
        cfg = HarnessConfig(tools={"account_op": ToolPolicy(identity_args={"account": "account_id"})})
        tool, bad, good, who = account_op, {"order_id": 7}, {"order_id": "7", "account": "acc-1"}, Principal(user_id="u-42")
    server.plan(Reply(tool_calls=[(tool.__name__, bad)]), Reply(tool_calls=[(tool.__name__, good)]), Reply(text="sorry"))
    h = Harness(cfg, load_entry_points=False, environ={})
    agent = agent_with(h, server, [tool])
    if who is None:
        await drive(agent, "look up order 7")
    else:
        with h.acting_for(who):
            await drive(agent, "look up order 7")
    first = json.dumps(server.requests[1]["messages"][-1])
    assert RAN == []
    assert "Call it again" not in first, first
    assert "[harness:permission_denied]" in first, first

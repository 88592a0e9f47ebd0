"""Round 131 a. With the tool adapter alone, the agent's previous run is no longer
settled when its next reply calls a tool: no report, its slot kept for good.

README "Limits"/adapters: "The tool adapter alone still gates every tool call: with no
`on_reply` to open runs, it opens one per reply at its first tool call, binds it while
each of its tools runs, and settles the agent's previous one when the next reply calls a
tool." README "Reports": every run gets a report (`harness.reports`, `on_report`).

Attack: an agent with only `HarnessToolAdapter` (no agent adapter). Reply 1 calls
`lookup` and answers; reply 2 calls `lookup` again.

What happens: `Harness.tool_only_run` settles the previous run through a fresh
`ReplyLifecycle(...).close(None)`; round 130's `close` returns at once when
`run.replied_by != self.serial`, and a run the tool adapter opens is never stamped
(`replied_by` 0, the fresh lifecycle's serial is not), so the previous run is neither
settled nor freed: no report for reply 1 ever reaches `harness.reports` / `on_report`,
and its slot stays in `harness.table.slots` (one leaked per reply).
Should: `tool_only_run` stamps the run it opens (or the close it borrows), or `close`
leaves a run be only when a *later* reply (a higher serial that is not this one) stamped it.
"""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, drain, make_agent, text, tool

pytestmark = pytest.mark.asyncio


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


async def test_previous_tool_only_run_is_settled_at_next_reply() -> None:
    published = []
    h = Harness(HarnessConfig(on_report=published.append), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"order_id": "A-1"})), text("A-1 is paid."),
                           calls(("lookup", {"order_id": "B-2"})), text("B-2 is paid."), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), [h.middlewares()[1]])
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "is A-1 paid?"))
        first = agent.state.reply_id
        await drain(agent, UserMsg("user", "is B-2 paid?"))
    assert [r.run_id for r in h.reports] == [first] and first not in h.table.slots, (
        f"reply 1 ({first}) settled when reply 2 called a tool: reports {[r.run_id for r in h.reports]}, "
        f"on_report got {len(published)}, slots still held {list(h.table.slots)}")

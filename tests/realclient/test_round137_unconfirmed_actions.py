"""Round 137 c (scenarios, README "The hooks" rows 13-25): what the user and the model
are told of a mutation whose effect is unknown.

- Cut at the deadline (still running when it passed): it was missing from what the run
  did (the fallback listed only what it found). It is listed: "started; the time ran out
  before it ended, so whether it went through is not confirmed".
- Timed out (`TimeoutError`: `timeout_unknown`, DESIGN "it may have happened: check before
  retrying"): a claim of it was corrected as "has not been done", inviting a second
  cancel. It is corrected as unconfirmed ("I cannot confirm ... Check before you try it
  again"), and the model is told it may have taken effect.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import make_agent, tool
from server import Reply
from side_kit import model as real_model

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.testing import ScriptedModel, calls, text

pytestmark = pytest.mark.asyncio

CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"


async def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


def _agent(config: HarnessConfig, model, fns: list):
    h = Harness(config, load_entry_points=False, environ={})
    return h, make_agent(model, h.instrument(Toolkit(tools=[tool(f) for f in fns])), h.middlewares())


async def test_a_mutation_cut_at_the_deadline_is_among_what_the_run_did(server) -> None:
    ran: list[str] = []

    async def cancel_order(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        ran.append(order_id)
        await asyncio.sleep(3)  # the orders API is slow today; the cancel may be applied
        return f"order {order_id} cancelled"

    server.plan(Reply(tool_calls=[("lookup", {"order_id": "A-1"})]),
                Reply(tool_calls=[("cancel_order", {"order_id": "A-1"})]),
                Reply(text="Order A-1 was cancelled."))
    h, agent = _agent(HarnessConfig(deadline_s=1.0, tools={"cancel_order": ToolPolicy(role="mutation", claims=[CLAIM])}),
                      real_model(server, "gpt-test"), [lookup, cancel_order])
    said = (await agent.reply(UserMsg("user", "cancel A-1"))).get_text_content() or ""
    report = h.last_report(agent)
    assert ran == ["A-1"] and (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "order A-1: paid" in said  # the control: what it found is handed over
    assert "cancel_order: started; the time ran out before it ended, so whether it went through is not confirmed" \
        in said, said


async def test_a_timed_out_mutation_claimed_is_corrected_as_unconfirmed() -> None:
    async def cancel_order(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        raise TimeoutError("orders API did not answer within 10 s")

    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1"})), text("Order A-1 was cancelled.")])
    h, agent = _agent(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[CLAIM])}),
                      model, [cancel_order])
    said = (await agent.reply(UserMsg("user", "cancel A-1"))).get_text_content() or ""
    report = h.last_report(agent)
    assert "it may have taken effect. Check before you call it again" in model.calls[1].last_result
    assert report.reason == "unsupported_claim"
    assert "has not been done" not in said and "cannot confirm" in said, said

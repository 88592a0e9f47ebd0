"""A payments lead and its payments sub-agent (rounds 107 c and 108 b): the
lead pays through the sub-agent and screens the payee in one batch; a
flagged payee stops the run (``sanctions_stop``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentscope.tool import Toolkit

from agentscope_harness import Harness, TerminalState, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, text, tool

RAN: list[str] = []
BLOCKED = "This payment is blocked: the payee is on a sanctions list."


async def wire_transfer(amount: int, payee: str) -> str:
    """Send money.

    Args:
        amount (int): USD.
        payee (str): Who receives it.
    """
    RAN.append(f"wire:{payee}:{amount}")
    return f"sent ${amount} to {payee}"


def screening(delay_s: float = 0.0) -> Callable[..., Any]:
    """The screening tool, answering after ``delay_s`` (a real service takes a moment)."""

    async def screen_payee(payee: str) -> str:
        """Screen a payee against the sanctions lists.

        Args:
            payee (str): Who.
        """
        if delay_s:
            await asyncio.sleep(delay_s)
        RAN.append(f"screen:{payee}")
        return "flagged: sanctions list"

    return screen_payee


@harness_hook("post_tool_call", priority=40, name="sanctions_stop", kind="observer")
def sanctions_stop(ctx: Any) -> None:
    if ctx.tool.name == "screen_payee" and "flagged" in ctx.result.raw_text:
        RAN.append("stopped")
        ctx.stop("sanctions_hit", TerminalState.FAILED, text=BLOCKED)


def payments_agent(h: Harness, model: Any) -> Any:
    """The sub-agent that wires the money."""
    return make_agent(model, h.instrument(Toolkit(tools=[tool(wire_transfer)])), h.middlewares(), name="payments")


def paying_lead(h: Harness, pay: Callable[..., Any], screen: Callable[..., Any]) -> Any:
    """The lead: pays (through ``pay``) and screens the payee in one batch, then says it paid."""
    return make_agent(
        ScriptedModel([calls(("pay", {"task": "wire $9000 to ACME"}), ("screen_payee", {"payee": "ACME"})),
                       text("Payment sent.")]),
        h.instrument(Toolkit(tools=[tool(pay), tool(screen)])), h.middlewares(), name="lead",
    )

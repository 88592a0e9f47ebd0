"""Round 113 (tool gating). An MCP server's tool that times out (AgentScope's ``MCPClient`` with
``execution_timeout``; the server's upstream hangs) never feeds the circuit
breaker, although the toolkit was ``harness.instrument``ed: AgentScope's MCP
client hands out a fresh ``MCPTool`` on every listing, which
``instrument_toolkit`` (reading ``group.tools`` only) never reaches, and the
harness's own warning tells the user to call ``instrument(toolkit)``, which
cannot help. The same timeout from a local tool opens the breaker (control).

README, tool_breaker_gate: "open after ``breaker_failures`` consecutive
dependency failures (``DependencyDown``, timeouts, connection errors ...),
refused as ``dependency_down``"."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agentscope.mcp import MCPClient, StdioMCPConfig
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

SERVER = str(Path(__file__).with_name("mcp_orders_server.py"))


async def slow_lookup(order_id: str) -> str:
    """Look up an order (slow upstream).

    Args:
        order_id (str): The order.
    """
    raise TimeoutError("Request 'tools/call' timed out")


async def _three_failures_then_one_more(h: Harness, toolkit: Toolkit, name: str):
    tries = [calls((name, {"order_id": f"A-{i}"})) for i in range(4)]
    model = ScriptedModel([*tries, text("Sorry, the order service is slow.")])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    with h.acting_for(ALICE):
        await agent.reply(UserMsg("user", "where are my orders?"))
    return h.last_report(agent)


async def test_control_a_local_tool_timing_out_opens_the_breaker() -> None:
    h = Harness(HarnessConfig(breaker_failures=3), load_entry_points=False)
    report = await _three_failures_then_one_more(
        h, Toolkit(tools=[FunctionTool(slow_lookup, permission=ALLOW)]), "slow_lookup")
    assert report.refusals.get("dependency_down", 0) >= 1 or report.reason == "dependency_down", report


async def test_an_mcp_tool_timing_out_opens_the_breaker() -> None:
    client = MCPClient(name="orders", is_stateful=True, execution_timeout=0.3,
                       mcp_config=StdioMCPConfig(command=sys.executable, args=[SERVER]))
    await client.connect()
    try:
        h = Harness(HarnessConfig(breaker_failures=3), load_entry_points=False)
        report = await _three_failures_then_one_more(h, Toolkit(mcps=[client]), "mcp__orders__slow_lookup")
    finally:
        await client.close()
    assert report.tool_calls.get("mcp__orders__slow_lookup") >= 3, report.tool_calls
    assert report.refusals.get("dependency_down", 0) >= 1 or report.reason == "dependency_down", (
        f"4 timeouts of the MCP tool, breaker never opened: {report.terminal_state.value} "
        f"{report.reason} {report.refusals}")

"""Round 115 (red team on round 114). Round 115 (red team on round 114). An MCP call its client timed out is a
plain tool error when the client speaks to an in-process server.

Round 114 classifies an ``MCPError`` -32001 as a timeout only when its message
reads "Request ... timed out" (``errors._mcp_client_error``), the words of the
MCP SDK's ``JSONRPCDispatcher``. The SDK's other dispatcher, the
``DirectDispatcher`` an ``mcp.Client(server)`` uses for an in-process server,
says its own timeout in other words: "Timed out after 0.3s waiting for
'tools/call'". An ``MCPTool`` (AgentScope's) on such a client, registered in the
toolkit and instrumented, times out four times in a row: each is
``tool_error``, the breaker never opens and the run ends ``completed``. (Round
113, by code alone, took it for a timeout.) A local tool timing out the same
way opens the breaker (control).

README ("Use it"): "an MCP call its client timed out is a timeout";
tool_breaker_gate: "open after `breaker_failures` consecutive dependency
failures (`DependencyDown`, timeouts, connection errors ...)"."""
from __future__ import annotations

import asyncio

import mcp
import pytest
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, MCPTool, Toolkit
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow_lookup(order_id: str) -> str:
    """Look up an order (its upstream hangs)."""
    await asyncio.sleep(30)
    return f"order {order_id}: shipped"


async def local_slow_lookup(order_id: str) -> str:
    """Look up an order (its upstream hangs).

    Args:
        order_id (str): The order.
    """
    raise TimeoutError("Timed out after 0.3s waiting for 'tools/call'")


async def _four_tries(toolkit: Toolkit, name: str):
    h = Harness(HarnessConfig(breaker_failures=3), load_entry_points=False, environ={})
    model = ScriptedModel([*[calls((name, {"order_id": f"A-{i}"})) for i in range(4)],
                           text("Sorry, the order service is slow.")])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    with h.acting_for(ALICE):
        await agent.reply(UserMsg("user", "where are my orders?"))
    classes = [b.metadata.get("harness", {}).get("error_class") for m in agent.state.context
               for b in (m.content if isinstance(m.content, list) else []) if getattr(b, "type", "") == "tool_result"]
    return h.last_report(agent), classes


async def test_control_a_local_tool_timing_out_opens_the_breaker() -> None:
    report, _ = await _four_tries(Toolkit(tools=[FunctionTool(local_slow_lookup, permission=ALLOW)]),
                                  "local_slow_lookup")
    assert report.refusals.get("dependency_down", 0) >= 1 or report.reason == "dependency_down", report


async def test_an_in_process_mcp_call_its_client_timed_out_is_a_timeout() -> None:
    async with mcp.Client(server) as client:
        raw = (await client.list_tools()).tools
        tool = MCPTool(mcp_name="orders", tool=raw[0], session=client, timeout=0.3)
        report, classes = await _four_tries(Toolkit(tools=[tool]), tool.name)
    assert classes[0] == "timeout_unknown", f"the MCP client's own timeout was classified {classes}"
    assert report.refusals.get("dependency_down", 0) >= 1 or report.reason == "dependency_down", (
        f"4 client timeouts of the MCP tool, breaker never opened: {report.terminal_state.value}/"
        f"{report.reason} {report.refusals} {report.tool_calls}")

"""Round 114 (red team on round 113). Round 113 classifies an ``MCPError`` by its code: -32000 (the MCP SDK's
``CONNECTION_CLOSED``) as a dependency down, -32001 (``REQUEST_TIMEOUT``) as
a timeout (``errors.classify_exception``). But the MCP client raises the same
``MCPError`` for a *peer's* error response, with the code the server chose,
and -32000..-32099 is JSON-RPC's range for a server's own errors (-32000 its
generic "server error"). A server that is up and answers "no order A-9"
under -32000 is taken as down: the run ends ``dependency_down`` with the
outage fallback (the model never gets to say the order does not exist) and the
circuit breaker counts it. A server answering the same as an ``isError`` result
(control) is a plain tool error and the run completes.

README ("Use it"): "an MCP call its client timed out is a timeout, a closed
connection a dependency down"; tool_breaker_gate: "consecutive dependency
failures (``DependencyDown``, timeouts, connection errors; never argument
errors ...)"."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agentscope.mcp import MCPClient, StdioMCPConfig
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

SERVER = str(Path(__file__).with_name("round114_errcode_mcp_server.py"))


@pytest.mark.parametrize("NAME", ["mcp__orders__lookup_order", "mcp__orders__find_order"])  # control first
async def test_a_server_answering_an_error_is_not_a_dependency_down(NAME: str) -> None:
    client = MCPClient(name="orders", is_stateful=True,
                       mcp_config=StdioMCPConfig(command=sys.executable, args=[SERVER]))
    await client.connect()
    try:
        h = Harness(HarnessConfig(), load_entry_points=False)
        model = ScriptedModel([calls((NAME, {"order_id": "A-9"})),
                               text("There is no order A-9; please check the number.")])
        agent = make_agent(model, h.instrument(Toolkit(mcps=[client])), h.middlewares())
        with h.acting_for(ALICE):
            final = await agent.reply(UserMsg("user", "where is my order A-9?"))
        report = h.last_report(agent)
    finally:
        await client.close()
    assert report.reason != "dependency_down", (
        f"the server answered 'no order A-9' and was taken as down: {report.terminal_state.value} "
        f"{report.reason}; the user got {final.get_text_content()!r}")
    assert report.terminal_state.value == "completed"

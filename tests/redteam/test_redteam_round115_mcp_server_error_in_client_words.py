"""Round 115 (red team on round 114). Round 115 (red team on round 114). A server's own JSON-RPC error is still
taken for the MCP client's closed connection when it is written in the
client's words.

Round 114 classifies an ``MCPError`` as a dependency down only for code -32000
with the message exactly "Connection closed" (``errors._mcp_client_error``).
But the MCP SDK raises the peer's error response as
``MCPError(code=outcome.code, message=outcome.message, data=outcome.data)``,
the very object it raises for its own closed connection: a server that is up
and answers its tool's failure under -32000 "Connection closed" (a proxy
server whose upstream connection closed, or one that wants its tool taken as
down) still ends the run ``dependency_down`` with the outage fallback and feeds
the breaker every process shares. The same server answering with another
message is the tool's error (control).

README ("Use it"): "a closed connection a dependency down; a server's own
error is the tool's, whatever its code"."""
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

SERVER = str(Path(__file__).with_name("mcp_orders_server.py"))
ANSWER = "There is no order A-9; please check the number."


async def _run(order_id: str):
    client = MCPClient(name="orders", is_stateful=True,
                       mcp_config=StdioMCPConfig(command=sys.executable, args=[SERVER]))
    await client.connect()
    try:
        h = Harness(HarnessConfig(), load_entry_points=False, environ={})
        model = ScriptedModel([calls(("mcp__orders__find_order", {"order_id": order_id})), text(ANSWER)])
        agent = make_agent(model, h.instrument(Toolkit(mcps=[client])), h.middlewares())
        with h.acting_for(ALICE):
            final = await agent.reply(UserMsg("user", f"where is my order {order_id}?"))
        # the same connection still answers: nothing closed
        alive = [t.name for t in await client.list_raw_tools()]
        return final.get_text_content() or "", h.last_report(agent), "lookup" in alive
    finally:
        await client.close()


@pytest.mark.xfail(strict=True, reason="README limit: the MCP SDK raises a server's error as it raises its own: a server answering in the client's code and words is taken at its word")
async def test_a_server_answering_in_the_clients_words_is_not_down() -> None:
    said, report, connected = await _run("A-9")
    assert connected  # the connection never closed: the server answered
    assert report.reason != "dependency_down", (
        f"the server answered its own error and was taken as down: {report.terminal_state.value}/"
        f"{report.reason}; the user got {said!r}")
    assert said == ANSWER

"""Round 116 (red team on round 115). An MCP tool of AgentScope's *stateless* HTTP client (``MCPClient(is_stateful=False,
mcp_config=HttpMCPConfig(...))``, AgentScope's documented HTTP pattern: a connection
per call) never gets its failure classified: the MCP SDK's own timeout
(``MCPError(-32001, "Request 'tools/call' timed out")``, the client's
``execution_timeout``) and a server dying mid-call (httpx ``RemoteProtocolError``)
reach the harness wrapped in anyio ``ExceptionGroup``s (the per-call client's task
groups), and ``errors.classify_exception`` looks at the outer exception only
(``type(exc).__name__ == "MCPError"``). Both are ``tool_error``: the server that died
is no ``dependency_down``, the run ends ``completed`` with the model's made-up
answer, and no timeout is counted by the breaker. The same server through a
*stateful* client (control) is a timeout / a dependency down.

README ("Use it"): "The tools of an MCP client in the toolkit (`Toolkit(mcps=[client])`)
are made afresh at every call: `instrument` wraps the client's `get_tool` so each one
it makes is instrumented too (an MCP call its client timed out is a timeout, a closed
connection a dependency down; a server's own error is the tool's)"; "Without it ... a
dependency that went down is neither `dependency_down` (the run would deliver the
model's answer, `completed`) nor counted by the circuit breaker"."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentscope.mcp import HttpMCPConfig, MCPClient
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

SERVER = str(Path(__file__).with_name("mcp_orders_server.py"))
ANSWER = "Order A-1 has shipped."


@pytest.fixture
def server_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait()


async def _run(url: str, stateful: bool, tool: str):
    client = MCPClient(name="orders", is_stateful=stateful, execution_timeout=0.5,
                       mcp_config=HttpMCPConfig(url=url, timeout=10))
    if stateful:
        await client.connect()
    try:
        h = Harness(HarnessConfig(), load_entry_points=False, environ={})
        model = ScriptedModel([calls((f"mcp__orders__{tool}", {"order_id": "A-1"})), text(ANSWER)])
        agent = make_agent(model, h.instrument(Toolkit(mcps=[client])), h.middlewares())
        with h.acting_for(ALICE):
            final = await agent.reply(UserMsg("user", "where is my order A-1?"))
        classes = [b.metadata.get("harness", {}).get("error_class") for m in agent.state.context
                   for b in (m.content if isinstance(m.content, list) else [])
                   if type(b).__name__ == "ToolResultBlock" and b.metadata]
        return final.get_text_content() or "", h.last_report(agent), classes
    finally:
        if stateful:
            await client.close()


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful_control", "stateless"])
async def test_an_mcp_timeout_is_a_timeout(server_url: str, stateful: bool) -> None:
    said, report, classes = await _run(server_url, stateful, "slow_lookup")
    assert classes == ["timeout_unknown"], (
        f"the MCP client timed out the call (-32001); classified {classes}, "
        f"run {report.terminal_state.value}/{report.reason}")


@pytest.mark.parametrize("stateful", [True, False], ids=["stateful_control", "stateless"])
async def test_a_server_dying_mid_call_is_a_dependency_down(server_url: str, stateful: bool) -> None:
    said, report, classes = await _run(server_url, stateful, "crash")
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down"), (
        f"the MCP server died mid-call; classified {classes}, run "
        f"{report.terminal_state.value}/{report.reason}, the user got {said!r}")
    assert said != ANSWER

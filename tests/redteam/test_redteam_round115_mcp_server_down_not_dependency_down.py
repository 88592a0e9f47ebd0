"""Round 115 (red team on round 114). Round 115 (red team on round 114). An MCP server that is down when the
model calls its tool is never a dependency down.

AgentScope's ``Toolkit`` lists an MCP client's tools at every call; when the
listing fails (the server died: "Connection closed") it logs "Skipping MCP"
and answers the call ``ToolNotFoundError: The tool named ... doesn't exist``
before any middleware runs. The instrumented subclass (round 114) wraps only
``get_tool``, which is never reached. So the model reads that the tool does
not exist, its answer (here a made-up "Order A-1 has shipped.") is delivered,
the run ends ``completed``/``answered`` and the circuit breaker counts nothing.
The same server dying *during* the call is ``dependency_down`` (control), and
so is a local tool raising ``ConnectionError``.

README ("Use it"): "Without it a tool's failure reaches the harness as text,
so a dependency that went down is neither `dependency_down` (the run would
deliver the model's answer, `completed`) nor counted by the circuit breaker.
... The tools of an MCP client in the toolkit ... `instrument` wraps the
client's `get_tool` so each one it makes is instrumented too (an MCP call its
client timed out is a timeout, a closed connection a dependency down ...)"."""
from __future__ import annotations

import asyncio
import os
import signal
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
ANSWER = "Order A-1 has shipped."


class KillsServerFirst(ScriptedModel):
    """The model's first request takes long enough for the MCP server to die
    (a crash, an OOM kill) after the toolkit listed its tools for it."""

    pidfile = ""
    kill = False

    async def _call_api(self, *args, **kwargs):
        if self.kill and not self.calls:
            os.kill(int(Path(self.pidfile).read_text()), signal.SIGKILL)
            await asyncio.sleep(0.3)
        return await super()._call_api(*args, **kwargs)


async def _run(tmp_path: Path, tool_name: str, kill: bool):
    pidfile = tmp_path / "server.pid"
    client = MCPClient(name="orders", is_stateful=True,
                       mcp_config=StdioMCPConfig(command=sys.executable, args=[SERVER, str(pidfile)]))
    await client.connect()
    try:
        h = Harness(HarnessConfig(), load_entry_points=False, environ={})
        model = KillsServerFirst([calls((tool_name, {"order_id": "A-1"})), text(ANSWER)])
        model.pidfile, model.kill = str(pidfile), kill
        agent = make_agent(model, h.instrument(Toolkit(mcps=[client])), h.middlewares())
        with h.acting_for(ALICE):
            final = await agent.reply(UserMsg("user", "where is my order A-1?"))
        return final.get_text_content() or "", h.last_report(agent)
    finally:
        await client.close()


async def test_control_a_server_dying_mid_call_is_a_dependency_down(tmp_path: Path) -> None:
    said, report = await _run(tmp_path, "mcp__orders__crash", kill=False)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert said != ANSWER


@pytest.mark.xfail(strict=True, reason="README limit: an MCP server that cannot list its tools when its tool is called is skipped by AgentScope's toolkit, which answers ToolNotFound before any middleware runs")
async def test_a_server_down_when_its_tool_is_called_is_a_dependency_down(tmp_path: Path) -> None:
    said, report = await _run(tmp_path, "mcp__orders__lookup", kill=True)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down"), (
        f"the MCP server was down; the run ended {report.terminal_state.value}/{report.reason}, "
        f"tool_calls={report.tool_calls}, and the user got the model's answer {said!r}")
    assert said != ANSWER

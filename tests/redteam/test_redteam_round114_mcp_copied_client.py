"""Round 114 (red team on round 113). A copy of an MCP client made after ``instrument`` wrapped the original's
``get_tool`` (``model_copy``: the same stateless HTTP client given another
user's credential header) inherits the wrapper *bound to the original*
(pydantic copies the instance ``__dict__``), so every tool the copy's toolkit
lists is made by the original client: Bob's call is sent with Alice's
credentials, only because the harness instrumented a toolkit. Without the
harness the copy sends its own (control).

README ("Use it"): "`instrument` wraps the client's `get_tool` so each one it
makes is instrumented too"; the wrapper's docstring (tool_adapter.py,
``_InstrumentedTools``): "bound to the client as a method: a copy of the
client makes its own". README, Identity: "the tool never runs for anyone but
the bound principal"."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agentscope.mcp import HttpMCPConfig, MCPClient
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, BOB, ScriptedModel, calls, make_agent, text, tool_messages

pytestmark = pytest.mark.asyncio

SERVER = str(Path(__file__).with_name("round114_tenant_mcp_server.py"))
NAME = "mcp__orders__my_orders"


@pytest.fixture(scope="module")
def url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                import time
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(5)


def _for(url: str, user: str) -> HttpMCPConfig:
    return HttpMCPConfig(url=url, headers={"x-user": user})


async def _reply(h: Harness, toolkit: Toolkit, who, instrument: bool) -> str:
    model = ScriptedModel([calls((NAME, {})), text("done")])
    agent = make_agent(model, h.instrument(toolkit) if instrument else toolkit,
                       h.middlewares() if instrument else [])
    with h.acting_for(who):
        await agent.reply(UserMsg("user", "what are my orders?"))
    return tool_messages(model.calls[-1])[-1]


async def _bobs_result(url: str, instrument: bool) -> str:
    h = Harness(HarnessConfig(), load_entry_points=False)
    alice_client = MCPClient(name="orders", is_stateful=False, mcp_config=_for(url, "alice"))
    assert "orders of alice" in await _reply(h, Toolkit(mcps=[alice_client]), ALICE, instrument)
    # the next request, Bob's: the same client with Bob's credential
    bob_client = alice_client.model_copy(update={"mcp_config": _for(url, "bob")})
    return await _reply(h, Toolkit(mcps=[bob_client]), BOB, instrument)


async def test_control_without_the_harness_the_copy_sends_its_own_credentials(url: str) -> None:
    assert "orders of bob" in await _bobs_result(url, instrument=False)


async def test_a_copied_client_sends_its_own_credentials_under_the_harness(url: str) -> None:
    seen = await _bobs_result(url, instrument=True)
    assert "orders of alice" not in seen, f"Bob's call ran with Alice's credentials: {seen!r}"
    assert "orders of bob" in seen, seen

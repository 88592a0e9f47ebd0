"""Round 96 red team (security): a client-executed result's data block now
reaches the formatter, and a ``file://`` URL there makes the *server* read
its own file into the model request.

Round 95 keeps a client's data blocks (``ReplyLifecycle.
_shape_client_result``; before, the fenced text replaced the whole output).
AgentScope's formatters (OpenAI, Anthropic, Gemini, DashScope, Ollama...)
read a ``URLSource`` whose URL starts with ``file://`` from the local disk
and inline it as base64 (and fetch an ``http`` one with a blocking
``requests.get``). ``shaped_data`` shapes the URL's *text*, not what it
points at: a client (the end user's app, which README treats as speaking
only for its tool's result) sends ``file:///srv/app/.env`` as an
``image/png`` and the server's credentials go to the provider, unredacted
(base64 is not a shape the redactor reads)."""

from __future__ import annotations

import base64
from pathlib import Path

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import DataBlock, TextBlock, ToolResultBlock, ToolResultState, URLSource, UserMsg
from round95_tr_kit import drive, harness
from scripted import ScriptedModel, calls, client_tool, make_agent, text

OPENAI = "sk-proj-" + "Q" * 40


async def test_a_clients_file_url_does_not_read_the_servers_disk(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_bytes(f"OPENAI_API_KEY={OPENAI}\n".encode())
    model = ScriptedModel([calls(("verify_code", {"code": "123"})), text("verified")])
    agent = make_agent(model, [client_tool()], harness().middlewares())
    items = await drive(agent, UserMsg("user", "check my code"))
    call = next(e for e in items if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    answer = ToolResultBlock(id=call.id, name=call.name, state=ToolResultState.SUCCESS, output=[
        TextBlock(text="photo of the device screen"),
        DataBlock(source=URLSource(url=f"file://{env}", media_type="image/png")),
    ])
    await drive(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[answer]))
    payload = str(model.calls[-1].formatted)
    assert "photo of the device screen" in payload
    assert base64.b64encode(env.read_bytes()).decode() not in payload

"""Round 95 red team (transparency): a client-executed result's content is
changed before the model reads it, beyond the documented fence.

README ("Every call is gated"): client-executed results "are redacted,
truncated and fenced before they enter the context", as a server tool's are
(whose data blocks stay beside the shaped text: "with the result's data blocks
(an image, its URL and name redacted) beside it"). ``ReplyLifecycle.
shape_external_results`` reads the result's text by gluing its text blocks
with nothing between them (``_block_text``) and, since the fence always
changes that text, replaces the whole ``output`` with the shaped string: a
client's screenshot beside its caption never reaches the model, and two text
blocks (two lines to AgentScope's formatter) run into one word.

Nothing here triggers any gate: with a default ``HarnessConfig()`` the model
must read what bare AgentScope gives it, inside the fence."""

from __future__ import annotations

from typing import Any

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, ToolResultBlock, ToolResultState, UserMsg
from round95_tr_kit import drive, harness
from scripted import ScriptedModel, calls, client_tool, make_agent, text

PNG = "iVBORw0KGgoAAAANSUhEUg=="


async def _what_the_model_read(harnessed: bool, output: list[Any]) -> str:
    """The payload of the model call after the client answered with ``output``."""
    model = ScriptedModel([calls(("verify_code", {"code": "123"})), text("verified")])
    agent = make_agent(model, [client_tool()], harness().middlewares() if harnessed else [])
    items = await drive(agent, UserMsg("user", "check my code"))
    call = next(e for e in items if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    answer = ToolResultBlock(id=call.id, name=call.name, output=output, state=ToolResultState.SUCCESS)
    items = await drive(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                            execution_results=[answer]))
    assert items[-1].get_text_content() == "verified"
    return str(model.calls[-1].formatted)


async def test_a_client_results_image_beside_its_text_reaches_the_model() -> None:
    def output() -> list[Any]:
        return [TextBlock(text="photo of the device screen"),
                DataBlock(source=Base64Source(data=PNG, media_type="image/png"))]

    bare = await _what_the_model_read(False, output())
    assert f"data:image/png;base64,{PNG}" in bare  # bare AgentScope shows the model the image
    harnessed = await _what_the_model_read(True, output())
    assert "photo of the device screen" in harnessed
    assert f"data:image/png;base64,{PNG}" in harnessed, harnessed


async def test_a_client_results_text_blocks_keep_their_separation() -> None:
    def output() -> list[Any]:
        return [TextBlock(text="code 123 accepted"), TextBlock(text="device trusted until 2027")]

    bare = await _what_the_model_read(False, output())
    assert "code 123 accepted\\ndevice trusted until 2027" in bare  # AgentScope: one line a block
    harnessed = await _what_the_model_read(True, output())
    assert "accepteddevice" not in harnessed, harnessed
    assert "code 123 accepted\\ndevice trusted until 2027" in harnessed, harnessed

"""Round 118 (red team on rounds 116-117). Round 117 reads and judges a data block's name to its first 1,024 characters
(``outputs.DATA_NAME_CHARS``) and removed the sliced judging of round 116. The server
tool's path cuts the names it judges (``tool_adapter._view_of``), but a client-executed
tool's result is judged in ``ReplyLifecycle._shape_client_result`` with
``names = tuple(b.name for b in data if b.name)``: whole. A client sending an image
named with a megabyte of ordinary prose holds the event loop while the injection
detector scores the megabyte in one synchronous call (every other reply of the process
waits), while the model reads only the first 1,024 characters of it.

README, Injected instructions: "The names of its data blocks (an image's) are judged
with its text: the model reads them outside the fence ..., each to its first 1,024
characters (a name is a label: a megabyte one would hold the event loop while judged)";
"Every call is gated": a client's result is shaped as a server tool's is.
Same measure as tests/perf/test_round116_data_name_scanned_in_one_step.py.
"""
from __future__ import annotations

import base64
from collections.abc import Awaitable
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, ToolResultBlock, ToolResultState, UserMsg

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import loop_gaps
from tests.scripted import calls, client_tool, drain, text

pytestmark = pytest.mark.asyncio

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 20).decode()
NAME = ("Use the tool with your own settings: run it from the system menu, then call support. " * 12_000)[:1_000_000]


async def _client_answers(agent: Agent) -> Awaitable[Any]:
    """The reply parks on the client's tool; the step measured: the client's answer, an image of that name."""
    items = await drain(agent, UserMsg("user", "check my code"))
    call = next(e for e in items if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    answer = ToolResultBlock(id=call.id, name=call.name, state=ToolResultState.SUCCESS, output=[
        TextBlock(text="code checked"), DataBlock(name=NAME, source=Base64Source(data=PNG, media_type="image/png"))])
    return drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[answer]))


async def test_a_client_images_megabyte_name_is_judged_to_what_the_model_reads() -> None:
    gap, bare, (model, bare_model), _ = await loop_gaps(
        [calls(("verify_code", {"code": "123"})), text("verified")], [client_tool()], _client_answers,
        HarnessConfig(tools={"verify_code": ToolPolicy(role="retrieval")}), instrument=False)
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"longest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same result: {bare * 1000:.1f} ms)")

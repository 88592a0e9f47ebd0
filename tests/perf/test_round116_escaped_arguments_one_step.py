"""Round 116 (adversarial performance). A model that does not stream calls a tool with a Chinese text of ~300,000
characters, its JSON arguments written with ``\\uXXXX`` escapes (as
``json.dumps`` writes them by default: 1.8 MB of JSON). The harness holds the
event loop ~0.35 s in one step before the tool runs; the bare agent ~40 ms.

README Security/Secrets: tool-call arguments are redacted "however the model
spells a secret: the escapes are put in one spelling first"; the issue's goal:
"Redaction and filtering never stall the loop" (no single block over 5 ms);
outputs.py: "Every step costs what the text costs". Not among the README's
stated limits (only a streamed answer's unbroken 1 MB token and a result's
metadata are said to be cleaned in one step).

Cause: ``outputs.JsonEscapes.feed`` -> ``canonical_escapes`` walks the text
escape by escape in Python (``_BACKSLASHES.match`` + ``_escape_at`` +
appends, ~1 us an escape) over the whole arguments in one synchronous call
(``agent_adapter`` ``_delta`` of the call block), with no turn for the loop.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

LOG = ("订单已发货，退款已处理。客户满意度很高，产品质量良好。\n" * 12_000)  # ~300,000 CJK characters


async def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path (str): Where.
        content (str): What.
    """
    return f"wrote {len(content)} characters"


async def _longest_gap(work: asyncio.Future) -> float:
    longest, last = 0.0, time.perf_counter()
    while not work.done():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    await work
    return longest


async def _gap(harnessed: bool) -> tuple[float, ScriptedModel]:
    model = ScriptedModel([calls(("write_file", {"path": "report.txt", "content": LOG})), text("done")], model="m")
    if harnessed:
        harness = Harness(HarnessConfig(), load_entry_points=False, environ={})
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(write_file)])), harness.middlewares())

        async def drive() -> None:
            with harness.acting_for(ALICE):
                await run(agent, "save the report")
    else:
        agent = make_agent(model, [write_file])

        async def drive() -> None:
            await run(agent, "save the report")
    return await _longest_gap(asyncio.ensure_future(drive())), model


async def test_escaped_arguments_are_read_without_holding_the_event_loop() -> None:
    bare, bare_model = await _gap(False)
    gap, model = await _gap(True)
    assert len(model.calls) == 2 and len(bare_model.calls) == 2
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < bare + 0.1, (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same call: {bare * 1000:.1f} ms)")

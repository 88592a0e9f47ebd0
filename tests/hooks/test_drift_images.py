"""Round 165 b (a doc note turned into a fix): progress was judged on a result's text only,
so a tool returning a new image under the same caption each time (a browser agent's
screenshots) read as a stall and a working run was stopped ``stalled``. A new image is
news; the same image again is not. Real Agent, a real tool in a real, instrumented Toolkit."""

from __future__ import annotations

import base64

from agentscope.message import Base64Source, DataBlock, TextBlock
from agentscope.tool import ToolChunk, Toolkit
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

SHOTS: list[bytes] = []



async def screenshot(page: int) -> ToolChunk:
    """Scroll to a page and take a screenshot.

    Args:
        page (int): The page.
    """
    shown = SHOTS[page] if page < len(SHOTS) else SHOTS[-1]
    return ToolChunk(content=[
        TextBlock(text="Screenshot taken."),
        DataBlock(name="screen", source=Base64Source(data=base64.b64encode(shown).decode(), media_type="image/png")),
    ])


async def _report(pages: list[bytes]) -> tuple[str, str]:
    SHOTS[:] = pages
    harness = Harness(HarnessConfig(require_finish_tool=False, stall_rounds=2, loop_threshold=20, loop_window=20,
                                    tools={"screenshot": ToolPolicy(role="retrieval")}),
                      load_entry_points=False, environ={})
    model = ScriptedModel([calls(("screenshot", {"page": n})) for n in range(8)] + [text("The form is filled in.")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(screenshot)])), harness.middlewares())
    await run(agent, "fill in the form")
    report = harness.last_report(agent)
    return report.terminal_state.value, report.reason


async def test_a_new_screenshot_under_the_same_caption_is_progress() -> None:
    pages = [b"\x89PNG\r\n\x1a\n" + bytes([n]) * 3000 for n in range(8)]
    assert await _report(pages) == ("completed", "answered")


async def test_the_same_screenshot_again_is_no_progress() -> None:
    assert await _report([b"\x89PNG\r\n\x1a\n" + b"\x07" * 3000]) == ("incomplete", "stalled")

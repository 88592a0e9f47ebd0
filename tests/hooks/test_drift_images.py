"""Rounds 165 b and 168 a (a doc note turned into a fix): progress was judged on a result's text only,
so a tool returning a new image under the same caption each time (a browser agent's
screenshots) read as a stall and a working run was stopped ``stalled``. A new image is
news; the same image again is not, on the worker that parked the run and on another that
resumed it (round 168 a: the images were not read again from the restored context).
Real Agent, a real tool in a real, instrumented Toolkit."""

from __future__ import annotations

import base64
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import Base64Source, DataBlock, TextBlock, URLSource, UserMsg
from agentscope.state import AgentState
from agentscope.tool import ToolChunk, Toolkit
from scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore

SHOTS: list[bytes] = []



async def screenshot(page: int, zoom: int = 1) -> ToolChunk:
    """Scroll to a page and take a screenshot.

    Args:
        page (int): The page.
        zoom (int): The zoom level.
    """
    shown = SHOTS[page] if page < len(SHOTS) else SHOTS[-1]
    if LINKED:  # a per-user CDN link, signed with a fresh token each time: the model reads both redacted
        source: Any = URLSource(url=f"https://cdn.example.com/u/jane.doe@example.com/{shown[-1]}.png?token="
                                f"{_jwt(next(_SIGNED))}", media_type="image/png")
    else:
        source = Base64Source(data=base64.b64encode(shown).decode(), media_type="image/png")
    return ToolChunk(content=[TextBlock(text="Screenshot taken."), DataBlock(name="screen", source=source)])


LINKED: list[bool] = []
_SIGNED = itertools.count()


def _jwt(n: int) -> str:
    def part(claims: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': 'shot', 'iat': 1765000000 + n})}.{'s' * 43}"


async def _report(pages: list[bytes], linked: bool = False) -> tuple[str, str]:
    SHOTS[:], LINKED[:] = pages, [True] if linked else []
    harness = Harness(HarnessConfig(require_finish_tool=False, stall_rounds=2, loop_threshold=20, loop_window=20,
                                    tools={"screenshot": ToolPolicy(role="retrieval", pii={"email": "redact"})}),
                      load_entry_points=False, environ={})
    model = ScriptedModel([calls(("screenshot", {"page": n})) for n in range(8)] + [text("The form is filled in.")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(screenshot)])), harness.middlewares())
    await run(agent, "fill in the form")
    report = harness.last_report(agent)
    return report.terminal_state.value, report.reason


async def test_a_new_screenshot_under_the_same_caption_is_progress() -> None:
    pages = [b"\x89PNG\r\n\x1a\n" + bytes([n]) * 3000 for n in range(8)]
    assert await _report(pages) == ("completed", "answered")


@pytest.mark.parametrize("linked", [False, True])
async def test_the_same_screenshot_again_is_no_progress(linked: bool) -> None:
    """Round 169 a: a signed link with a fresh token each time, which the model reads
    redacted (one and the same link), was news at every call: judged as the model reads it."""
    assert await _report([b"\x89PNG\r\n\x1a\n" + b"\x07" * 3000], linked) == ("incomplete", "stalled")


async def submit_form(form: str) -> str:
    """Submit a form.

    Args:
        form (str): The form.
    """
    return f"form {form} submitted, confirmation number pending review by the clerk"


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("elsewhere", [False, True])
async def test_screenshots_seen_before_a_park_are_no_news_after_it(tmp_path: Path, elsewhere: bool,
                                                                    linked: bool) -> None:
    """Round 169 a: a link carrying the user's e-mail was digested as the tool wrote it live,
    and as the context keeps it (redacted) on the worker that resumed: news there again."""
    SHOTS[:], LINKED[:] = [b"\x89PNG\r\n\x1a\n" + bytes([n + 1]) * 3000 for n in range(2)], [True] if linked else []
    path = str(tmp_path / "shared.db")

    def worker() -> tuple[Harness, Toolkit]:
        harness = Harness(HarnessConfig(
            store=SQLiteStore(path), loop_window=40, loop_threshold=40, stall_rounds=2, require_finish_tool=False,
            tools={"screenshot": ToolPolicy(role="retrieval", pii={"email": "redact"}),
                   "submit_form": ToolPolicy(ask_when=lambda args: "each submission needs a yes")},
        ), load_entry_points=False, environ={})
        return harness, harness.instrument(Toolkit(tools=[tool(screenshot), tool(submit_form)]))

    model = ScriptedModel(
        [calls(("screenshot", {"page": i})) for i in range(2)] + [calls(("submit_form", {"form": "visa"}))]
        + [calls(("screenshot", {"page": i % 2, "zoom": 2 + i})) for i in range(3)] + [text("done")],
    )
    harness, toolkit = worker()
    agent = make_agent(model, toolkit, harness.middlewares())
    with harness.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "fill in the visa form and submit it"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    if elsewhere:  # answered on another worker sharing the store, the agent's state restored
        harness, toolkit = worker()
        agent = make_agent(model, toolkit, harness.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with harness.acting_for(ALICE):
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    assert "brought nothing new" in json.dumps(model.calls[-1].formatted)

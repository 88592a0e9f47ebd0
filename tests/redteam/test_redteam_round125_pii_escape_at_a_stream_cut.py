"""Round 125 (red team on round 124). An email right after a JSON escape (``\\n``) in a tool result over 4 KB reaches the
model (and the user's stream) unredacted when it lies where the result's PII pass cuts
its 4 KB steps; a character earlier or later it is rewritten.

README "Personal data": "A value is found wherever it stands but inside a word of Latin
letters and digits: glued to Chinese or Japanese text, or right after a JSON escape
(`\\n`, `\\u00a0`: a result or arguments kept as JSON)."
Cause: outputs.filter_result -> PiiStream._send keeps one character of left context
(``_before``); pii._AFTER_ESCAPE needs the whole escape (2 or 6 characters) before the
value, so a value starting at (or straddling) a cut is read as glued to the letter ``n``.
"""
from __future__ import annotations

import json

import pytest
from agentscope.event import ToolResultTextDeltaEvent

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.outputs import PII_HOLD, PII_INLINE
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
EMAIL = "alice.nguyen@example.com"
CUT = PII_INLINE - PII_HOLD  # the first cut of a result's PII pass
PAGE: dict[str, str] = {}


def _page(pad: int) -> str:
    notes = [{"id": i, "text": "Customer asked about delivery times and the return policy. " * 3}
             for i in range(40)]
    notes[5]["text"] = "Customer wrote back" + "." * pad + ":\n" + EMAIL + " (please reply there)"
    return json.dumps({"notes": notes})  # a JSON API response, as json.dumps writes it


def page_at(offset: int) -> str:
    pad = offset - _page(0).index(EMAIL)
    page = _page(pad)
    assert page.index(EMAIL) == offset and page[offset - 2:offset] == "\\n"
    return page


async def list_notes(ticket: str) -> str:
    """List a ticket's notes.

    Args:
        ticket (str): The ticket id.
    """
    return PAGE["text"]


async def _read(offset: int) -> tuple[str, str]:
    PAGE["text"] = page_at(offset)
    h = Harness(HarnessConfig(tools={"list_notes": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("list_notes", {"ticket": "T-1"})), text("ok")], stream=True)
    agent = make_agent(model, [list_notes], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "show T-1 notes")
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    return tool_messages(model.calls[-1])[-1], shown


@pytest.mark.parametrize("offset", [CUT - 40, CUT + 40])
async def test_control_away_from_the_cut(offset: int) -> None:
    read, shown = await _read(offset)
    assert EMAIL not in read and "[pii:email]" in read
    assert EMAIL not in shown


@pytest.mark.parametrize("offset", [CUT - 1, CUT])
async def test_email_after_escape_at_the_cut(offset: int) -> None:
    read, shown = await _read(offset)
    assert EMAIL not in read, f"the model read the email whole (offset {offset})"
    assert EMAIL not in shown, f"the user's stream showed the email whole (offset {offset})"

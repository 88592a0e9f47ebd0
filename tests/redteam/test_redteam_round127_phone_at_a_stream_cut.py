"""Round 127 a. PiiStream keeps 8 characters of left context (``_before``) across its
steps and drops every finding that starts in them, but such a finding still takes up
the text it spans: ``pii._scan`` resumes after it. Two UK numbers written as a pair
("020 7946 0958/020 7946 0959", or with one space between) are two findings in the
whole text; when a step's cut falls on the second (the cut moves to its start), the
next step reads "0958/020 7946" from its left context (the tail of the first number and
the start of the second: 11 digits, a UK layout), drops it as already sent, and resumes
past it: "020 7946 0959" reaches the model and the user's stream whole. One character
earlier or later it is rewritten.

README, Personal data: "A value is found wherever it stands but inside a word of Latin
letters and digits"; outputs._pii_in_pieces: "a stream: the same result as the whole".
Cause: outputs.PiiStream._send: ``find_pii(before + buf)`` then dropping findings that
start before ``k``: a dropped finding must not shadow one starting at or after ``k``
(scan from ``k`` for values that start there, or keep the earlier step's findings).
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultTextDeltaEvent

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.pii import apply_pii
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
SECOND = "020 7946 0959"
CUT = 4096 - 320  # outputs.PII_INLINE - PII_HOLD: the first cut of a result's PII pass
PAGE: dict[str, str] = {}


def page_at(offset: int, sep: str = "/") -> str:
    head = "".join(f"Branch {i}: open 9-5, closed on public holidays. Ask at the desk.\n" for i in range(50))
    line = "Head office, tel 020 7946 0958" + sep + SECOND + " (switchboard/direct), weekdays only.\n"
    pad = offset - len(head) - line.index(SECOND)
    assert pad >= 0
    page = head + " " * pad + line + head
    assert page.index(SECOND) == offset
    return page


async def list_branches(city: str) -> str:
    """List a city's branches.

    Args:
        city (str): The city.
    """
    return PAGE["text"]


async def _read(offset: int, sep: str) -> tuple[str, str]:
    PAGE["text"] = page_at(offset, sep)
    assert SECOND not in apply_pii(PAGE["text"], {"phone": "redact"}, b"s").text  # rewritten when whole
    h = Harness(HarnessConfig(tools={"list_branches": ToolPolicy(role="lookup", pii={"phone": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("list_branches", {"city": "London"})), text("ok")], stream=True)
    agent = make_agent(model, [list_branches], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "where is the head office?")
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    return tool_messages(model.calls[-1])[-1], shown


@pytest.mark.parametrize("offset", [CUT - 40, CUT + 40])
async def test_control_away_from_the_cut(offset: int) -> None:
    read, shown = await _read(offset, "/")
    assert SECOND not in read and SECOND not in shown and "[pii:phone]/[pii:phone]" in read


@pytest.mark.parametrize("sep", ["/", " "])
async def test_second_number_at_the_cut_is_rewritten(sep: str) -> None:
    read, shown = await _read(CUT - 5, sep)
    assert SECOND not in read, "the model read the second number: " + read[read.find("Head office"):][:80]
    assert SECOND not in shown, "the user's stream showed the second number"

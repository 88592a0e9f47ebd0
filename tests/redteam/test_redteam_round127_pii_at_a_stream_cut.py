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

Round 134 b (a) (the e-mail cases). Round 133 moved the "run of dots" left edge of an e-mail address into
the match (``\\.*`` before the local part) and made ``_scan`` start the finding after the
dots. But ``PiiStream`` scans each step from ``k`` (after its 8 characters of left
context): when a step's cut falls in, or right after, the dots (" ...maria.garcia@..."),
the next step starts its search where the character before is a dot, so the usual left
edge fails and the ``\\.*`` it would need lies before ``k``: the address is never found
and reaches the model (and the user's stream) whole. At 5e85daa the lookbehind
``(?<=[\\s...]\\.{1,3})`` read the dots in the left context: the address was rewritten.

Promise: README Security "Personal data": "A value is found wherever it stands ...";
outputs._pii_in_pieces: "a stream: the same result as the whole" (the whole text is
redacted; see the control).
Attack: a lookup tool (``pii={"email": "redact"}``) returns a >4 KB page whose
" ...maria.garcia@empresa.es" sits at the first cut of the result's PII pass.
Fix (outputs.PiiStream._send / pii._scan): let a value start at ``k`` after dots in the
left context, e.g. scan from the start of the dot run that ends at ``k`` (or keep a
zero-width left edge ``(?<=(?:^|[^A-Za-z0-9_.%+\\-\\\\...])\\.+)`` alternative).
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultTextDeltaEvent

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.outputs import PII_HOLD, PII_INLINE
from agentscope_harness.pii import apply_pii
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
SECOND = "020 7946 0959"
ADDR = "maria.garcia@empresa.es"
CUT = PII_INLINE - PII_HOLD  # the first cut of a result's PII pass
PAGE: dict[str, str] = {}


def page_at(offset: int, line: str, value: str) -> str:
    """A page longer than ``PII_INLINE`` with ``line`` in it, ``value`` (in ``line``) at ``offset``."""
    head = "".join(f"Branch {i}: open 9-5, closed on public holidays. Ask at the desk.\n" for i in range(PII_INLINE // 130))
    pad = offset - len(head) - line.index(value)
    assert pad >= 0
    page = head + " " * pad + line + head
    assert page.index(value) == offset
    return page


async def lookup(q: str) -> str:
    """Look a page up.

    Args:
        q (str): What.
    """
    return PAGE["text"]


async def _read(page: str, kind: str, value: str) -> tuple[str, str]:
    """What the model read and what the user's stream showed of ``page``
    through a lookup whose `pii` redacts ``kind``."""
    PAGE["text"] = page
    assert value not in apply_pii(page, {kind: "redact"}, b"s").text  # rewritten when whole
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="lookup", pii={kind: "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "it"})), text("ok")], stream=True)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "where is it?")
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    return tool_messages(model.calls[-1])[-1], shown


def phones(offset: int, sep: str) -> str:
    line = "Head office, tel 020 7946 0958" + sep + SECOND + " (switchboard/direct), weekdays only.\n"
    return page_at(offset, line, SECOND)


def address(offset: int, dots: str) -> str:
    return page_at(offset, f"Forwarded by{dots}{ADDR} wrote: please call back.\n", ADDR)


@pytest.mark.parametrize("offset", [CUT - 40, CUT + 40])
async def test_control_away_from_the_cut(offset: int) -> None:
    read, shown = await _read(phones(offset, "/"), "phone", SECOND)
    assert SECOND not in read and SECOND not in shown and "[pii:phone]/[pii:phone]" in read
    read, shown = await _read(address(offset, " ..."), "email", ADDR)
    assert ADDR not in read and ADDR not in shown


@pytest.mark.parametrize("sep", ["/", " "])
async def test_second_number_at_the_cut_is_rewritten(sep: str) -> None:
    read, shown = await _read(phones(CUT - 5, sep), "phone", SECOND)
    assert SECOND not in read, "the model read the second number: " + read[read.find("Head office"):][:80]
    assert SECOND not in shown, "the user's stream showed the second number"


@pytest.mark.parametrize("dots,shift", [(" ...", 0), (" ...", -1), (" ..", 0), (" .", 0)])
async def test_address_after_dots_at_the_cut_is_redacted(dots: str, shift: int) -> None:
    read, shown = await _read(address(CUT + shift, dots), "email", ADDR)
    assert ADDR not in read, "the model read " + read[read.find("Forwarded"):][:70]
    assert ADDR not in shown, "the user's stream showed the address"

"""Round 134 b (a). Round 133 moved the "run of dots" left edge of an e-mail address into
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
from agentscope_harness.pii import apply_pii
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
ADDR = "maria.garcia@empresa.es"
CUT = 4096 - 320  # outputs.PII_INLINE - PII_HOLD: the first cut of a result's PII pass
PAGE: dict[str, str] = {}


def page_at(offset: int, dots: str) -> str:
    head = "".join(f"Ticket {i}: resolved, no further action needed by the desk.\n" for i in range(55))
    line = f"Forwarded by{dots}{ADDR} wrote: please call back.\n"
    pad = offset - len(head) - line.index(ADDR)
    assert pad >= 0
    page = head + " " * pad + line + head
    assert page.index(ADDR) == offset
    return page


async def lookup_ticket(ticket: str) -> str:
    """Look a ticket up.

    Args:
        ticket (str): The ticket.
    """
    return PAGE["text"]


async def _read(offset: int, dots: str) -> tuple[str, str]:
    PAGE["text"] = page_at(offset, dots)
    assert ADDR not in apply_pii(PAGE["text"], {"email": "redact"}, b"s").text  # rewritten when whole
    h = Harness(HarnessConfig(tools={"lookup_ticket": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup_ticket", {"ticket": "T-1"})), text("ok")], stream=True)
    agent = make_agent(model, [lookup_ticket], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "who forwarded it?")
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    return tool_messages(model.calls[-1])[-1], shown


async def test_control_away_from_the_cut() -> None:
    read, shown = await _read(CUT - 60, " ...")
    assert ADDR not in read and ADDR not in shown


@pytest.mark.parametrize("dots,shift", [(" ...", 0), (" ...", -1), (" ..", 0), (" .", 0)])
async def test_address_after_dots_at_the_cut_is_redacted(dots: str, shift: int) -> None:
    read, shown = await _read(CUT + shift, dots)
    assert ADDR not in read, "the model read " + read[read.find("Forwarded"):][:70]
    assert ADDR not in shown, "the user's stream showed the address"

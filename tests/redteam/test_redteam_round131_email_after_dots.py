"""Round 131 b: an e-mail address right after a dot that follows a space (a list
truncated with three periods, `...maria.garcia@empresa.es`; a leading-dot field) is
not found at all: the model reads it whole, with any `pii` mode.

Promise (README, Security "Personal data": "A value is found wherever it stands but
inside a word of Latin letters and digits: glued to Chinese or Japanese text, or right
after a JSON escape ..."). A dot after a space is no word of Latin letters.

Attack: a CRM export the tool returns lists contacts, one shortened by its UI:
"Contacts: ann@acme.com, ...maria.garcia@empresa.es". Tool `pii={"email": "redact"}`.

What happens: the e-mail pattern's left edge `(?<![A-Za-z0-9_.%+\\-\\\\...])` refuses a
start after `.`, and a local part may not start with `.`: no match starts at the dots
nor after them. The first address is redacted, the second reaches the model.
Fix (pii.py email left edge): let a value start after a run of dots that itself stands
at a left edge (`(?<=(?<![A-Za-z0-9_%+\\-\\\\...])\\.)` ... or strip leading dots: match
`\\.*` before the local part and start the finding after it).
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio


async def lookup_contact(name: str) -> str:
    """Look a contact up in the CRM.

    Args:
        name (str): The contact.
    """
    return "Contacts: ann@acme.com, ...maria.garcia@empresa.es (2 of 9 shown)"


async def test_an_address_after_three_periods_is_redacted() -> None:
    h = Harness(HarnessConfig(tools={"lookup_contact": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup_contact", {"name": "supplier"})), text("ok")])
    agent = make_agent(model, [lookup_contact], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "who are the supplier's contacts?")
    read = tool_messages(model.calls[-1])[-1]
    assert "ann@acme.com" not in read  # the control: redacted
    assert "garcia@empresa.es" not in read, f"the model read {read!r}"

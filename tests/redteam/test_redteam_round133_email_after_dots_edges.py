"""Round 133b: round 131 finds an address after a run of dots only when a space or one of
``,;:(<[{"'>`` stands before the dots, and only up to three dots. A result that *starts*
with the dots (a search snippet cut on the left: "...maria.garcia@empresa.es wrote"), four
dots, or dots after CJK punctuation ("联系人：...maria...") or ``|``/``/``/``=`` leaves the
address whole for the model, in every ``pii`` mode.

Promise (README Security "Personal data": "A value is found wherever it stands but inside
a word of Latin letters and digits: glued to Chinese or Japanese text ..."); round 131's
test: an address after three periods is redacted.
Attack: a lookup tool (``pii={"email": "redact"}``) returns one of the texts below.
What happens: the left edge ``(?<=[\\s,;:(<\\[{"'>]\\.{1,3})`` needs a listed character
before the dots: the address reaches the model. Fails at 307c536, a757632 and c67a834.
Fix (pii.py email left edge): let a value start after any run of dots that itself stands
at a left edge, e.g. match ``\\.*`` before the local part under the usual left edge and
start the finding after the dots (no fixed-width lookbehind needed).
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
RESULT: list[str] = []
TEXTS = [
    "...maria.garcia@empresa.es wrote: the invoice is attached.",
    "Contacts: ann@acme.com, ....maria.garcia@empresa.es",
    "联系人：...maria.garcia@empresa.es",
    "| ann@acme.com |...maria.garcia@empresa.es |",
]


async def lookup_contact(name: str) -> str:
    """Look a contact up in the CRM.

    Args:
        name (str): The contact.
    """
    return RESULT[-1]


@pytest.mark.parametrize("result", TEXTS)
async def test_an_address_after_a_run_of_dots_is_redacted(result: str) -> None:
    RESULT.append(result)
    h = Harness(HarnessConfig(tools={"lookup_contact": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup_contact", {"name": "supplier"})), text("ok")])
    agent = make_agent(model, [lookup_contact], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "who are the supplier's contacts?")
    read = tool_messages(model.calls[-1])[-1]
    assert "garcia@empresa.es" not in read, f"the model read {read!r}"

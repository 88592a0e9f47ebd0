"""Round 123 (personal data). HarnessConfig.pii applies to "the model's streamed ... tool-call arguments,
every call's (streamed arguments are shown rewritten ...)" (README,
Configuration, `pii`). Tool-call arguments are JSON, where a line break or a tab
inside a string is the escape `\\n` / `\\t`. The detectors' one-character
left-context guards (`(?<![\\w+\\-.])` for phones, `(?<![\\w.])` for IPv4,
`(?<![\\w:.])` for IPv6, `(?<![A-Za-z0-9])` for IBANs) read the escape's letter
`n`/`t` as a word character glued to the value, so a phone, an IP address or
an IBAN written on its own line of a note streams to the user whole. The same
value on its own line in the text answer is rewritten (control). Cause:
outputs.OutputFilter (json_args) feeds the JSON text with its escapes
(`canonical_escapes` keeps `\\n`) to pii.find_pii.
"""

from __future__ import annotations

import pytest
from agentscope.event import ToolCallDeltaEvent

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

VALUES = {
    "phone": "(415) 555-0132",
    "ipv4": "203.0.113.77",
    "iban": "DE89370400440532013000",
}


async def send_note(note: str) -> str:
    """Send a note to the support team.

    Args:
        note (str): The note.
    """
    return "sent"


def _shown(events: list) -> str:
    return "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))


@pytest.mark.parametrize("kind", sorted(VALUES))
async def test_control_the_value_on_its_own_line_of_the_answer_is_rewritten(kind: str) -> None:
    value = VALUES[kind]
    h = Harness(HarnessConfig(pii={kind: "redact"}), load_entry_points=False, environ={})
    model = ScriptedModel([text(f"Noted. Customer details:\n{value}")], stream=True)
    agent = make_agent(model, [send_note], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "note it")
    assert value not in final.get_text_content()


@pytest.mark.parametrize("kind", sorted(VALUES))
async def test_the_value_on_its_own_line_of_a_streamed_argument_is_rewritten(kind: str) -> None:
    value = VALUES[kind]
    h = Harness(HarnessConfig(pii={kind: "redact"}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("send_note", {"note": f"Customer details:\n{value}"})), text("Sent.")],
                          stream=True)
    agent = make_agent(model, [send_note], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "note it")
    shown = _shown(events)
    assert "Customer details" in shown, shown  # the arguments were streamed
    assert value not in shown, f"{kind} streamed to the user whole: {shown!r}"

"""Round 132: an e-mail address right after a single backslash whose first letter is
``u`` (``CORP\\uwe.schmidt@...``, ``\\\\fs01\\home\\ulrike.meyer@....pst``) reaches the
model whole in a plain-text result.

Promise (README "Personal data": a value is found wherever it stands but inside a word
of Latin letters and digits ... or right after a JSON escape; round 126's own test
``test_redteam_round126_email_after_a_backslash_letter``: "\\ursula@ found").
Attack: a tool returns plain text (a domain\\user log line, a UNC path) with the address
after one backslash; the address's local part starts with ``u`` but no ``\\uXXXX``
escape stands there (``uwe.``, ``ulrike``, ``ursula``: no four hex digits).
What happens: round 131 changed the e-mail left edge from
``(?<=\\\\)(?!u[0-9A-Fa-f]{4})`` to ``(?<=\\\\)(?![\\\\u])``: no match may start at any
``u`` after a backslash, and none can start inside the word: the model reads the
address. Worked at 307c536, 6c042c8 and c1d39ac.
Fix (pii.DETECTORS["email"] left edge): keep ``(?<=\\\\)(?!u[0-9A-Fa-f]{4})`` for a
single backslash (the speed-up needs only ``(?!\\\\)``: ``(?<=\\\\)(?!\\\\|u[0-9A-Fa-f]{4})``).
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
CASES = {
    "domain_user_log": ("uwe.schmidt@firma-gmbh.de",
                        "2026-12-05 09:14:02 logon ok: FIRMA\\uwe.schmidt@firma-gmbh.de from WS-12"),
    "unc_pst_path": ("ulrike.meyer@firma-gmbh.de",
                     "Archive: \\\\fs01\\home\\ulrike.meyer@firma-gmbh.de.pst (4.2 GB)"),
    "windows_profile": ("ursula.weber@contoso.com",
                        "Profile dir: C:\\Users\\ursula.weber@contoso.com\\Desktop"),
}
CURRENT: dict[str, str] = {}


async def inspect_host(host: str) -> str:
    """Inspect a workstation.

    Args:
        host (str): The workstation.
    """
    return CURRENT["text"]


@pytest.mark.parametrize("case", list(CASES))
async def test_email_after_backslash_u_is_rewritten(case: str) -> None:
    email, result = CASES[case]
    CURRENT["text"] = result
    h = Harness(HarnessConfig(tools={"inspect_host": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("inspect_host", {"host": "WS-12"})), text("ok")])
    agent = make_agent(model, [inspect_host], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "what happened on WS-12?")
    read = tool_messages(model.calls[-1])[-1]
    assert "[pii:email]" in read, f"{case}: no address rewritten: {read!r}"
    assert email.split("@")[0][1:] not in read and email.split("@")[1] not in read, f"{case}: {read!r}"

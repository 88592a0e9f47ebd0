"""Round 126 (red team on round 125). Round 126 (red team on round 125). An e-mail right after a backslash whose local part
starts with one of JSON's escape letters: ``C:\\...\\Outlook\\ursula.weber@contoso.com.ost``
(plain text, or the same path in JSON as ``\\\\``). The round-125 guard
``(?<=\\\\)(?![nrtbfu])`` refuses to start at the ``u``, and ``_AFTER_ESCAPE`` needs
``\\uXXXX`` hex: the address reaches the model whole. With ``n`` (``\\\\nancy.weber@...``),
the value is found from its second letter and the model reads ``n[pii:email]``: a part of it.

README "Personal data": "A value is found wherever it stands but inside a word of Latin
letters and digits: ... or right after a JSON escape" (round 125's own test: an e-mail after
a backslash in a Windows path is rewritten).
Cause: pii.DETECTORS["email"] left guard: a backslash that is itself escaped (``\\\\``) or
not a JSON escape at all is read as the start of ``\\n``/``\\u``.
"""
from __future__ import annotations

import json

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
BASE = r"C:\Users\uweber\AppData\Local\Microsoft\Outlook" + "\\"
CASES = {
    "u_windows_path": ("ursula.weber@contoso.com", None),
    "u_windows_path_json": ("ursula.weber@contoso.com", "json"),
    "n_windows_path": ("nancy.weber@contoso.com", None),
    "n_windows_path_json": ("nancy.weber@contoso.com", "json"),
    "control_alice": ("alice.weber@contoso.com", None),
}
CURRENT: dict[str, str] = {}


async def inspect_pc(host: str) -> str:
    """Inspect a workstation's mail setup.

    Args:
        host (str): The workstation.
    """
    return CURRENT["text"]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_email_is_rewritten_whole(case: str) -> None:
    email, form = CASES[case]
    path = BASE + email + ".ost"
    CURRENT["text"] = json.dumps({"mailbox_file": path}) if form else f"Mailbox file: {path} (2.1 GB)"
    h = Harness(HarnessConfig(tools={"inspect_pc": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("inspect_pc", {"host": "WS-12"})), text("ok")])
    agent = make_agent(model, [inspect_pc], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "why is Outlook slow on WS-12?")
    read = tool_messages(model.calls[-1])[-1]
    local = email.split("@")[0]
    assert "[pii:email]" in read and email[1:] not in read, f"{case}: the model read the email: {read[-200:]!r}"
    assert (email[0] + "[pii:email]") not in read, f"{case}: the model read its first letter: {read[-200:]!r}"
    assert local not in read

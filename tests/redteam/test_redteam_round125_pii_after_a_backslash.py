"""Round 125 (red team on round 124). An email right after a backslash reaches the model whole: a Windows path (Outlook names
its data file after the mailbox: ``...\\Outlook\\alice.nguyen@contoso.com.ost``), the same
path in JSON (``\\\\``), or after the JSON escapes ``\\f`` (a PDF's page break, as
``json.dumps`` writes it) and ``\\b``. The previous commit rewrote the first two; the same
address after a space (control) is rewritten.

README "Personal data": "A value is found wherever it stands but inside a word of Latin
letters and digits: glued to Chinese or Japanese text, or right after a JSON escape".
Cause: pii.DETECTORS["email"] left guard ``(?<![A-Za-z0-9_.%+\\-\\\\])`` now refuses any
backslash before the value, and ``_AFTER_ESCAPE`` lets back only ``\\n \\r \\t \\uXXXX``.
"""
from __future__ import annotations

import json

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio
EMAIL = "alice.nguyen@contoso.com"
OST = r"C:\Users\anguyen\AppData\Local\Microsoft\Outlook" + "\\" + EMAIL + ".ost"
CASES = {
    "control_space": f"Mailbox file: {EMAIL}.ost (2.1 GB)",
    "windows_path": f"Mailbox file: {OST} (2.1 GB)",
    "windows_path_json": json.dumps({"mailbox_file": OST, "size_gb": 2.1}),
    "pdf_page_break_json": json.dumps({"text": "Invoice 2026-114, page 1 of 2\f" + EMAIL + " | Accounts"}),
    "backspace_json": json.dumps({"text": "Reply to:\b" + EMAIL}),
}
CURRENT: dict[str, str] = {}


async def inspect_pc(host: str) -> str:
    """Inspect a workstation's mail setup.

    Args:
        host (str): The workstation.
    """
    return CURRENT["text"]


async def _read(result: str) -> str:
    """What the model read of ``result``, the tool's ``pii`` redacting e-mails."""
    CURRENT["text"] = result
    h = Harness(HarnessConfig(tools={"inspect_pc": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("inspect_pc", {"host": "WS-12"})), text("ok")])
    agent = make_agent(model, [inspect_pc], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "why is Outlook slow on WS-12?")
    return tool_messages(model.calls[-1])[-1]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_email_is_rewritten(case: str) -> None:
    read = await _read(CASES[case])
    assert "[pii:email]" in read and EMAIL not in read, f"{case}: the model read the email whole: {read[-300:]!r}"


async def test_a_json_result_reads_the_tag_after_the_escapes_backslash() -> None:
    """README (round 179, stated): "the escape's letter is rewritten with the
    value, so the backslash before it is left before the tag, ``\\[pii:email]``,
    and JSON kept as text no longer parses there"."""
    read = await _read(CASES["pdf_page_break_json"])
    assert "page 1 of 2\\[pii:email] | Accounts" in read, read[-300:]

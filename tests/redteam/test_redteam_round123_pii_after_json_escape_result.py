"""Round 123 (personal data). A tool's `ToolPolicy.pii` rewrites its results "as the model reads and the
stream shows them" (README, Keeps data where it belongs; content_filter:
"applies `ToolPolicy.pii`"). A tool that returns JSON (a CRM record) writes a
line break inside a field as the escape `\\n`; the model reads it as a line
break. The detectors' one-character left-context guards read the escape's `n`
as a word character glued to the value, so a phone, IPv4 address or IBAN on
its own line of a field reaches the model and the user's stream whole, while
the same record printed as plain text is rewritten (control). Cause:
hooks/safety.content_filter -> outputs.filter_result -> pii.find_pii on the
raw JSON text (lookbehinds `(?<![\\w+\\-.])`, `(?<![\\w.])`, `(?<![A-Za-z0-9])`).

Round 124 (red team on round 123): PII right after a JSON \\uXXXX escape in a tool's JSON result reaches the model whole.

Round 123 taught the detectors to match right after the JSON escapes ``\\n``, ``\\r``,
``\\t``. Python's ``json.dumps`` (default ``ensure_ascii=True``) writes every non-ASCII
character as ``\\uXXXX``: a Chinese record "邮箱：alice@example.com" becomes
``\\u90ae\\u7bb1\\uff1aalice@example.com`` and a no-break space before a phone number
``Tel.:\\u00a0+44 20 7946 0958``. The escape's last hex digit reads as a word character
glued to the value: the e-mail / phone / IP / IBAN is missed. The same record as plain
text (control) is rewritten. Cause: pii.DETECTORS lookbehinds only admit ``\\\\[nrt]``;
outputs.filter_result applies pii to the raw JSON text (no canonical_escapes for results).
"""

from __future__ import annotations

import json

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CASES = {  # (what stands before the value, the value): JSON writes a line break as an escape
    # (round 123), and by default every other character outside ASCII too (round 124)
    "phone": ("Preferred contact:\n", "(415) 555-0132"),
    "ipv4": ("Preferred contact:\n", "203.0.113.77"),
    "iban": ("Preferred contact:\n", "DE89370400440532013000"),
    "email_after_cjk": ("邮箱：", "alice@example.com"),
    "phone_after_nbsp": ("Tel.:\u00a0", "+44 20 7946 0958"),
    "ipv4_after_nbsp": ("IP\u00a0", "203.0.113.77"),
    "iban_after_nbsp": ("IBAN\u00a0", "DE89370400440532013000"),
}
CURRENT: dict[str, object] = {}


async def get_customer(customer_id: str) -> str:
    """Fetch a customer record as JSON.

    Args:
        customer_id (str): The customer.
    """
    return CURRENT["as"](customer_id)


def _as_json(customer_id: str) -> str:
    label, value = CURRENT["case"]
    return json.dumps({"id": customer_id, "contact": f"{label}{value}"})  # Python's default: ensure_ascii


def _as_text(customer_id: str) -> str:
    label, value = CURRENT["case"]
    return f"id: {customer_id}\ncontact: {label}{value}"


async def _read(case: str, shape) -> str:
    CURRENT.update(case=CASES[case], **{"as": shape})
    kind = case.split("_")[0]
    h = Harness(HarnessConfig(tools={"get_customer": ToolPolicy(role="lookup", pii={kind: "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("get_customer", {"customer_id": "c-1"})), text("ok")])
    agent = make_agent(model, [get_customer], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "show c-1")
    return tool_messages(model.calls[-1])[-1]  # what the model read


@pytest.mark.parametrize("case", sorted(CASES))
async def test_control_a_plain_text_record_is_rewritten(case: str) -> None:
    read = await _read(case, _as_text)
    assert CASES[case][1] not in read, read


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_json_record_is_rewritten(case: str) -> None:
    read = await _read(case, _as_json)
    assert "c-1" in read
    assert CASES[case][1] not in read, f"{case} reached the model whole: {read!r}"

"""Round 128 a. One address, two hash tags in one result: JSON carried in a JSON string.

README, Personal data: "`hash` (stable within a run, ...)"; "right after a JSON escape
(`\\n`, `\\u00a0`: a result or arguments kept as JSON; the escape's letter is rewritten
with the value, and its tag and mask read the value after the escape, so one address has
one tag in a result; ...)". README, Injected instructions treats JSON in a JSON string
(a Lambda ``body``) as a result the model reads decoded twice.
Cause: pii._value_at reads an even run of backslashes (``\\\\n``) as an escaped backslash
and the letter as the value's; in JSON inside a JSON string that run IS the line break
(``\\n`` escaped once more), which the injection side reads as one (``escape_levels``).
"""
from __future__ import annotations

import json
import re

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio


async def _read(result: str) -> str:
    return await result_read(result, role="lookup", pii={"email": "hash"})


def _tags(read: str) -> set[str]:
    return set(re.findall(r"\[pii:email:[0-9a-f]+\]", read))


async def test_one_address_one_tag_in_a_json_body() -> None:
    """The attack (no attacker needed): an API Gateway / Lambda answer whose ``body`` is
    JSON: ``{"statusCode": 200, "body": "{\\"reporter\\": \\"Opened by:\\\\nalice@contoso.com\\",
    \\"cc\\": \\"alice@contoso.com\\"}"}``. The reporter's address follows a line break
    escaped twice; the cc is the same address.
    What happened: two tags: the first address is tagged as ``nalice@contoso.com``. In
    the one-level JSON of the same ticket (the control) they share one tag.
    Should: one tag (the model can no longer tell it is the reporter it is cc-ing)."""
    ticket = {"reporter": "Opened by:\nalice@contoso.com", "cc": "alice@contoso.com"}
    read = await _read(json.dumps(ticket))  # the control: one level of JSON
    assert "alice" not in read and len(_tags(read)) == 1, read[-300:]
    read = await _read(json.dumps({"statusCode": 200, "body": json.dumps(ticket)}))
    assert "alice" not in read
    assert len(_tags(read)) == 1, f"one address, {len(_tags(read))} tags: {read[-300:]!r}"

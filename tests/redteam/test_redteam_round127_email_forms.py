"""Round 127 a. E-mail addresses read otherwise than the rest of a result.

I. Round 126's e-mail rule "a value may start right after a backslash
unless a whole ``\\uXXXX`` stands there" reads every backslash alike, escaped or not:

1. hash mode (a regression of round 126): in a JSON result an address after a line
   break or a tab (``"Team lead:\\nalice@contoso.com"``) is now found from the escape's
   letter, as ``nalice@contoso.com``, so the same address gets another tag than beside
   it in the same result (``"cc": "alice@contoso.com"``), and a third after ``\\t``:
   the model can no longer tell they are one person (round 125 found it from ``a``).
2. an address that starts with ``u`` and four hex digits (a University of Utah uNID
   ``u0123456@utah.edu``) after an escaped backslash in JSON (``D:\\\\Mail\\\\u0123...``:
   the backslash is a character, not an escape) is found from its sixth character:
   the model reads ``u0123[pii:email]``, part of the address; ``u1234@...`` is not
   found at all.

README, Personal data: "`hash` (stable within a run, ...)"; "A value is found wherever
it stands but inside a word of Latin letters and digits: ... or right after a JSON
escape (`\\n`, `\\u00a0`: a result or arguments kept as JSON)". pii.hash_tag: "the same
value gives the same tag under one salt (so the model can still match it across results)".
Cause: pii.DETECTORS["email"] left guard: ``(?<=\\\\)(?!u[0-9A-Fa-f]{4})`` starts at an
escape's letter (``\\n``) and refuses a ``u`` after an escaped backslash (``\\\\u``).

II. An e-mail address at an internationalised domain (``bücher.de``,
``müller-bau.de``: IDNs are sold in every ccTLD that allows them) or with an accented
local part (``josé.garcía@correo.es``, RFC 6531) is not found (the first) or found from its last
ASCII run (``josé.garcí[pii:email]``): the email pattern's value classes are ASCII only, and the address reaches the model
(and, written back, the user) whole, where the same address at an ASCII domain, or
the domain's own punycode form (``xn--mller-bau-...``), is rewritten.

README, Personal data: "`ToolPolicy.pii` and `HarnessConfig.pii`: detectors `email`, ...";
"A value is found wherever it stands but inside a word of Latin letters and digits";
the Limit names only "names and addresses" (postal) as not found.
Cause: pii.DETECTORS["email"] value classes ``[A-Za-z0-9...]``: letters of the domain
and local part should be ``[^\\W]`` (Unicode word characters) while the edges keep
their ASCII-letter rule (round 124's CJK-glued values).
"""
from __future__ import annotations

import json
import re

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio


async def _read(result: str, mode: str) -> str:
    return await result_read(result, role="lookup", pii={"email": mode})


async def test_one_address_gets_one_hash_tag_in_a_json_result() -> None:
    result = json.dumps({"owner": "Team lead:\nalice@contoso.com", "cc": "alice@contoso.com",
                         "oncall": "week 12\talice@contoso.com"})
    read = await _read(result, "hash")
    assert "alice" not in read
    tags = set(re.findall(r"\[pii:email:[0-9a-f]+\]", read))
    assert len(tags) == 1, f"one address, {len(tags)} tags: {read[-300:]!r}"


@pytest.mark.parametrize("email", ["u0123456@utah.edu", "u1234@utah.edu"])
async def test_an_address_after_an_escaped_backslash_is_rewritten_whole(email: str) -> None:
    result = json.dumps({"mailbox_file": "D:\\Mail\\" + email + ".ost", "size": "2.1 GB"})
    read = await _read(result, "redact")
    local = email.split("@")[0]
    assert "[pii:email]" in read and "utah.edu" not in read, f"the model read the address: {read[-200:]!r}"
    assert local[:5] not in read, f"the model read part of the address: {read[-200:]!r}"


@pytest.mark.parametrize("email", ["anna.schmidt@mueller-bau.de",  # the control: ASCII
                                   "anna.schmidt@müller-bau.de", "josé.garcía@correo.es"])
async def test_an_international_address_is_rewritten(email: str) -> None:
    read = await _read(f"Contact: Anna Schmidt <{email}>, purchasing.", "redact")
    assert "<[pii:email]>" in read, f"the model read: {read!r}"

"""Round 129 b. An accented e-mail address in a JSON result, as Python's `json.dumps`
(and Django's `JsonResponse`, Flask's old default) writes it, is not found, or
found from its last escape on: the model reads the address, or most of it.

README, Personal data: "A value is found wherever it stands but inside a word of
Latin letters and digits: glued to Chinese or Japanese text, or right after a
JSON escape (`\\n`, `\\u00a0`: a result or arguments kept as JSON; the escape's
letter is rewritten with the value, and its tag and mask read the value after
the escape ... so one address has one tag in a result). An e-mail address may
hold Latin letters with accents (`josé.garcía@`, `müller-bau.de`, Vietnamese's,
accents written apart)."

Attack: a CRM lookup answers JSON with the default `ensure_ascii=True`, so every
accented letter is `\\u00XX`: `{"email": "m\\u00fcller@m\\u00fcller-bau.de"}`.
Nothing is hidden: any model reads `\\u00fc` as `ü` (the injection detector of
this very harness decodes `\\uXXXX` in every reading).

What happens (tool `pii={"email": "redact"}`): `müller@müller-bau.de` and
`renée@société.fr` are not found at all (the model reads them whole);
`josé.garcía@correo.es` is found from its last escape on and the model reads
`jos\\u00e9.garc\\` + the marker; `nguyễn.văn.an@` keeps `nguy\\u1ec5n.v\\u0103`.
The same addresses written as UTF-8 are rewritten whole.
Should: an address's `\\uXXXX`-escaped letters are letters of it (the value read
decoded, as its tag and mask already read `\\n`'s): `[pii:email]` whole.
"""
from __future__ import annotations

import json

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("ensure_ascii", [False, True], ids=["utf8_control", "json_dumps_default"])
@pytest.mark.parametrize("email", [
    "müller@müller-bau.de", "renée@société.fr", "josé.garcía@correo.es", "nguyễn.văn.an@example.vn",
])
async def test_an_accented_address_in_json_is_rewritten_whole(email: str, ensure_ascii: bool) -> None:
    body = json.dumps({"name": "Supplier", "email": email, "role": "purchasing"}, ensure_ascii=ensure_ascii)
    read = await result_read(body, role="lookup", pii={"email": "redact"})
    local = email.split("@")[0]
    assert '"email": "[pii:email]"' in read, (
        f"the CRM answered {body!r}; the model read {read[read.find('email'):][:90]!r} "
        f"(the address's local part {local!r} is there, escaped)")

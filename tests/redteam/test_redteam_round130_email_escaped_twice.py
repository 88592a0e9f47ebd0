"""Round 130 b: an accented e-mail address in JSON carried in a JSON string (the
Lambda/API Gateway body, `ensure_ascii` both times) is not found, or found from its
last escape on: the model reads the address, or its local part, and its hash tag
differs from the same address's elsewhere.

Promise (README, Security "Personal data"): "A value is found wherever it stands but
inside a word of Latin letters and digits: ... right after a JSON escape (...; the
escape's letter is rewritten with the value, and its tag and mask read the value
after the escape, one escaped or two, `\\\\n` in JSON carried in a JSON string, so one
address has one tag in a result). An e-mail address may hold Latin letters with
accents (`josé.garcía@`, `müller-bau.de`, ...)"; `hash` "stable within a run".

Attack: a CRM behind API Gateway answers `json.dumps({"statusCode": 200, "body":
json.dumps({"email": "maría.garcía@empresa.es"})})`: the accents are escaped twice,
`mar\\\\u00eda.garc\\\\u00eda@empresa.es` (round 129 made one level, `\\u00ed`, part of
an address; round 127 reads this very body form for injections).

What happens (tool `pii={"email": "redact"}` / `"hash"`): `müller@müller-bau.de` is
not found at all; `maría.garcía@` is found from after its last backslash, so the model
reads `mar\\\\u00eda.garc\\` + the marker; `josé@correo.es` leaves `jos\\`; and the hash
tag of the part found is not the address's tag in the inner JSON or in plain text.
"""
from __future__ import annotations

import json

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio
EMAILS = ["müller@müller-bau.de", "maría.garcía@empresa.es", "josé@correo.es"]


def _lambda(email: str) -> str:
    return json.dumps({"statusCode": 200, "body": json.dumps({"name": "Supplier", "email": email})})


async def _read(result: str, mode: str) -> str:
    return await result_read(result, role="lookup", pii={"email": mode})


@pytest.mark.parametrize("email", EMAILS)
async def test_an_accented_address_escaped_twice_is_rewritten_whole(email: str) -> None:
    body = _lambda(email)
    read = await _read(body, "redact")
    assert '\\"email\\": \\"[pii:email]\\"' in read, (
        f"the CRM answered {body!r}; the model read {read[read.find('email'):][:80]!r}")


async def test_one_address_has_one_tag_in_a_result() -> None:
    email = "josé@correo.es"
    inner = json.dumps({"name": "Supplier", "email": email})
    both = json.dumps({"statusCode": 200, "body": inner, "contact": email})  # escaped twice, and once
    read = await _read(both, "hash")
    tags = sorted({t.split("]")[0] for t in read.split("[pii:email:")[1:]})
    assert len(tags) == 1, f"one address, tags {tags}: the model read {read[read.find('body'):][:160]!r}"

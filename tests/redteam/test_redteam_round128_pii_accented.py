"""Round 128 a. Round 127's accented e-mail addresses stop at U+024F.

README, Personal data: "An e-mail address may hold Latin letters with accents
(`josé.garcía@`, `müller-bau.de`)"; "A value is found wherever it stands but inside a word
of Latin letters and digits". tests/redteam/test_redteam_round127_email_forms.py: "the
model reads ... part of the address".
Cause: pii._ACCENTED is U+00C0-U+024F only: Vietnamese letters (Latin Extended
Additional, U+1E00-U+1EFF: ễ ầ ạ ộ) are no letter of an address, and an address written
decomposed (NFD: ``e`` + U+0301, as macOS file names and many PDFs carry text) holds a
combining mark the pattern does not take. The match then starts after the last such
letter (part of the local part is left for the model) or is not made at all.
"""
from __future__ import annotations

import unicodedata

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("email", [
    "josé.garcía@correo.es",  # the control: round 127's own example, NFC
    "nguyen.van.an@example.vn",  # the control: ASCII
    "nguyễn.văn.an@example.vn",  # Vietnamese, NFC
    "trần.thị.bình@công-ty.vn",
    unicodedata.normalize("NFD", "josé.garcía@correo.es"),  # the same address, decomposed
    unicodedata.normalize("NFD", "renée.dupont@société.fr"),
], ids=["nfc_control", "ascii_control", "vietnamese", "vietnamese_idn", "nfd", "nfd_partial"])
async def test_an_accented_address_is_rewritten_whole(email: str) -> None:
    """The attack: a contact record whose address carries Vietnamese letters, or
    accents written as combining marks. What happened: ``nguyễ[pii:email]``,
    ``rené[pii:email]`` (part of the local part read by the model) or the whole address
    untouched (NFD ``josé.garcía@correo.es``). Should: ``<[pii:email]>``."""
    read = await result_read(f"Supplier: Anh Nguyen <{email}>, purchasing.", role="lookup", pii={"email": "redact"})
    assert "<[pii:email]>" in read, f"the model read: {read[-120:]!r}"

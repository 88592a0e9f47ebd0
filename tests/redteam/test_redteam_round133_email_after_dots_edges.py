"""Round 133b: round 131 finds an address after a run of dots only when a space or one of
``,;:(<[{"'>`` stands before the dots, and only up to three dots. A result that *starts*
with the dots (a search snippet cut on the left: "...maria.garcia@empresa.es wrote"), four
dots, or dots after CJK punctuation ("联系人：...maria...") or ``|``/``/``/``=`` leaves the
address whole for the model, in every ``pii`` mode.

Promise (README Security "Personal data": "A value is found wherever it stands but inside
a word of Latin letters and digits: glued to Chinese or Japanese text ..."); round 131's
test: an address after three periods is redacted.
Attack: a lookup tool (``pii={"email": "redact"}``) returns one of the texts below.
What happens: the left edge ``(?<=[\\s,;:(<\\[{"'>]\\.{1,3})`` needs a listed character
before the dots: the address reaches the model. Fails at 307c536, a757632 and c67a834.
Fix (pii.py email left edge): let a value start after any run of dots that itself stands
at a left edge, e.g. match ``\\.*`` before the local part under the usual left edge and
start the finding after the dots (no fixed-width lookbehind needed).
"""
from __future__ import annotations

import pytest

from tests.redteam.result_kit import result_read

pytestmark = pytest.mark.asyncio
TEXTS = [
    "...maria.garcia@empresa.es wrote: the invoice is attached.",
    "Contacts: ann@acme.com, ....maria.garcia@empresa.es",
    "联系人：...maria.garcia@empresa.es",
    "| ann@acme.com |...maria.garcia@empresa.es |",
]


@pytest.mark.parametrize("result", TEXTS)
async def test_an_address_after_a_run_of_dots_is_redacted(result: str) -> None:
    read = await result_read(result, role="lookup", pii={"email": "redact"})
    assert "garcia@empresa.es" not in read, f"the model read {read!r}"

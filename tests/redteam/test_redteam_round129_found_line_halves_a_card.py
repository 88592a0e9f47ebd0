"""Round 129 d: the stopped run's "What I found" line cuts a personal-data
value in half, and the half that shows is no longer recognised.

Promise (README, "What the caller receives": a run stopped for a cap gets
"`fallback_text` ... plus a short, redacted list of what the run did ... and
what it found"; "An answer the harness gives in the model's place (a stop's
text, the fallback and what the run found) is filtered ... its `pii` `block`
kinds are redacted in it"; "Keeps data where it belongs": the answer by the
config's `HarnessConfig.pii`). The brief's promise under attack: a truncated
result never cuts a personal-data value in half so that part of it shows.

Attack: a tool with no `pii` of its own (the model may read the card: the
tool's `pii` governs what the model reads) returns a customer record whose
card number straddles character 300 of the line, the cut `calls._finding`
makes (`FINDING_CHARS`). `HarnessConfig.pii={"card": "redact"}` governs
what the user receives. The run is stopped by `max_model_calls`, so the user
gets the fallback plus "What I found".

What happens: the found line keeps the card's first digits (`4111 1111 11…`);
cut, they fail Luhn, so the answer filter no longer finds a card and the user
receives most of the card number. `calls._finding` documents that the cut is
safe because `content_filter` already filtered the result whole: true of the
tool's `pii`, not of the config's, which the answer is held to.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.asyncio

from scripted import calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel

CARD = "4111 1111 1111 1111"  # Luhn-valid test card


async def lookup_customer(customer_id: str) -> str:
    """Look up a customer.

    Args:
        customer_id (str): The customer.
    """
    # the finding line is cut at its 300th character: the card starts at
    # 284 ("c-7"), so 16 of its 19 characters are kept; at 20 ("c-0") it is whole
    at = 284 if customer_id == "c-7" else 20
    prefix = (f"customer {customer_id} record: " + "note " * 80)[: at - 1] + " "
    return prefix + CARD + " expires 12/29, billing address on file."


async def _stopped_answer(customer_id: str) -> str:
    h = Harness(HarnessConfig(pii={"card": "redact"}, max_model_calls=1), load_entry_points=False)
    model = ScriptedModel([calls(("lookup_customer", {"customer_id": customer_id})), text("never reached")])
    agent = make_agent(model, [lookup_customer], middlewares=h.middlewares())
    _, final = await run(agent, "what card does the customer use?")
    report = h.last_report(agent)
    assert report.reason == "max_model_calls", report.reason
    answer = final.get_text_content() or ""
    assert "What I found" in answer, answer  # the stopped run's list is there
    return answer


async def test_found_line_never_shows_half_a_card():
    whole = await _stopped_answer("c-0")
    assert "4111" not in whole, whole  # a whole card in the line is redacted for the user
    cut = await _stopped_answer("c-7")
    # cut at the line's end, the card's first 14 digits must not reach the user either
    assert "4111 1111 1111" not in cut, cut

"""Round 158 a: a megabyte answer whose claims the answer's pii filter hides, each claim read
as written and shown through the filter one by one, in the synchronous audit.

A README limit (strict xfail): the final answer's audit runs in one step; an answer of
megabytes making tens of thousands of claims holds the event loop (about 0.5 s for 30,000
unsupported claims in 1 MB; with ``pii``, whose scan of a megabyte alone takes about 0.4 s,
and each hidden claim's values read through the filter, about 1.5 s)."""
from __future__ import annotations

import pytest
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import loop_gaps

N = 30000
CLAIM = r"receipt (?:was )?sent to (?P<email>[\w.]+@[\w.]+\w)"


async def send_receipt(email: str) -> str:
    """Send the receipt.

    Args:
        email (str): Where to.
    """
    return "sent"


@pytest.mark.xfail(strict=True, reason="README limit: the answer's audit runs in one step")
@pytest.mark.parametrize("pii", [{}, {"email": "redact"}])
async def test_a_megabyte_of_hidden_claims_is_audited_without_holding_the_loop(pii) -> None:
    """README Security: "the loop gets a turn after every millisecond of work" (round 121:
    a 1 MB answer of 35,000 claims audited without holding the loop; bound: 2x the bare
    agent + 50 ms). Attack: HarnessConfig.pii={"email": "redact"}; a 1 MB answer of 30,000
    "receipt sent to uN@shop.example." claims, one real send_receipt call. Each claim is
    hidden from the filtered text, found in the text as written, and each one's text and
    value are run through the whole answer filter (redactor + pii) one at a time inside the
    synchronous final_answer_audit. Happened (2 shared cores): pii redact 1.4-2.0 s on the
    current code against ~0.3 s at da29e43 (a 5x regression of round 157 a); pii={} holds it
    0.45-0.95 s on both (pre-existing: 30,000 unsupported claims each read as numbers)."""
    script = [calls(("send_receipt", {"email": "u0@shop.example"})),
              text("Done. " + " ".join(f"The receipt was sent to u{i}@shop.example." for i in range(N)))]
    gap, bare, (model, _), (final, _) = await loop_gaps(
        script, [send_receipt], "send receipts",
        HarnessConfig(pii=pii, tools={"send_receipt": ToolPolicy(role="mutation", claims=[CLAIM])}), model="m")
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < 2 * bare + 0.05, f"held {gap * 1000:.0f} ms (bare {bare * 1000:.1f} ms)"

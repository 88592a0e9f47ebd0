"""Round 157 c red team on round 156 c's ``ModelGuard._uncounted``.

README, "What the caller receives": "a model missing from the `prices` of a budget with no cap
(`cap_usd`, `daily_quota_usd`) | as without it: the call is made | its calls are not counted in
`spent_usd`, and an `unpriced_model` decision says so, once per run: in the report of each run
whose `spent_usd` leaves them out (a lead's, for its sub-agent's calls; none where the
sub-agent's own Harness prices the model: the lead is charged that price)".

``ModelGuard._unpriced`` calls ``_uncounted`` only when NO capped policy of the chain lacks the
model (``_unlisted`` empty). When one does (a capped ancestor beside an uncapped policy), it
records one decision on the calling run only, worded for the capped policy.
"""
from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.test_redteam_round156c_unpriced_sub_agent import _reports

pytestmark = pytest.mark.asyncio

PRICES = {"priced": (1.0, 1.0)}


def _unpriced(report):
    return [d.detail for d in report.decisions if d.action == "unpriced_model"]


async def test_uncapped_sub_agent_under_a_capped_lead_with_a_stated_unpriced_price() -> None:
    """Attack: the lead's Harness caps the run (`cap_usd`) and charges unlisted models a stated
    `unpriced` price; the sub-agent's own Harness has an uncapped policy pricing "priced" only.
    The sub-agent calls "mystery": its own `spent_usd` leaves the calls out (its policy has no
    price, its Harness charges $0). Happened: the sub-agent's report says "charged at the stated
    unpriced price" (the lead's policy's words) next to `spent_usd == 0.0`, and never that its
    calls are not counted. Should: its report says they are not counted in its spent_usd."""
    lead_h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices=PRICES, unpriced=(1.0, 1.0))),
                     load_entry_points=False, environ={})
    child_h = Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    lead_report, child_report = await _reports(lead_h, child_h, "priced")
    assert child_report.model_calls == 2
    assert lead_report.spent_usd > 0
    said = _unpriced(child_report)
    assert child_report.spent_usd == 0.0, child_report.spent_usd
    assert any("not counted in spent_usd" in d for d in said), (said, child_report.spent_usd)


async def test_uncapped_lead_above_a_shadow_capped_sub_agent_harness() -> None:
    """Attack: the lead's Harness is uncapped and prices "priced" only; the sub-agent's Harness is
    in shadow mode with a capped policy that lacks "mystery" too (the call is made: shadow only
    records). The lead's `spent_usd` leaves the sub-agent's 2 calls out. Happened: `_unlisted`
    finds the shadow cap, so `_uncounted` is never reached; the lead's report says nothing.
    Should: the lead's report says `unpriced_model` (its spend leaves them out)."""
    lead_h = Harness(HarnessConfig(cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    child_h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(cap_usd=5.0, prices=PRICES)),
                      load_entry_points=False, environ={})
    lead_report, child_report = await _reports(lead_h, child_h, "priced")
    assert child_report.model_calls == 2  # made: shadow
    assert lead_report.model_calls == 4
    assert _unpriced(lead_report), ([(d.hook, d.action, d.detail) for d in lead_report.decisions],
                                    lead_report.spent_usd)

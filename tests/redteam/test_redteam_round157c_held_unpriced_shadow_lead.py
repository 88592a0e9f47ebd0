"""Round 157 c (held): a shadow-mode lead with an uncapped policy, its sub-agent's Harness with no cost."""
from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.test_redteam_round157c_unpriced_mixed import PRICES, _reports, _unpriced

pytestmark = pytest.mark.asyncio


async def test_shadow_lead() -> None:
    lead_h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    child_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    lead_report, child_report = await _reports(lead_h, child_h, "priced")
    assert _unpriced(lead_report)
    assert not _unpriced(child_report)

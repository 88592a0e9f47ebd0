"""Round 157 c (held): a shadow-mode lead with an uncapped policy, its sub-agent's Harness with no cost."""
from __future__ import annotations

import pytest
from scripted import ALICE, run

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.redteam.test_redteam_round157c_unpriced_mixed import PRICES, _lead_and_child, _unpriced

pytestmark = pytest.mark.asyncio


async def test_shadow_lead() -> None:
    lead_h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(prices=PRICES)), load_entry_points=False, environ={})
    child_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    lead, child = _lead_and_child(lead_h, child_h, "priced")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    assert _unpriced(lead_h.last_report(lead))
    assert not _unpriced(child_h.last_report(child))

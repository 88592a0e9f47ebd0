"""Round 152 d's doc note: `agentscope-harness demo --model openai` with a model name the
demo's price table does not list showed "spend (demo prices) $0.0000" for the harnessed
run of the budget scenario while its report said $0.000350: the demo priced it from the
config's `prices` only, not its `unpriced` price, as the harness does.
"""
from __future__ import annotations

import pytest
from server import Reply
from side_kit import model as real_model

from agentscope_harness.demo import SCENARIOS, run_scenario

pytestmark = pytest.mark.asyncio


async def test_the_demo_shows_what_the_harness_charged(server) -> None:
    server.plan(Reply(text="Here are some headphones."))
    out = await run_scenario(SCENARIOS["budget"], harnessed=True,
                             model_factory=lambda scenario, tier: real_model(server, "my-model"))
    assert out.report is not None and out.report.spent_usd > 0
    assert out.usd == pytest.approx(out.report.spent_usd)

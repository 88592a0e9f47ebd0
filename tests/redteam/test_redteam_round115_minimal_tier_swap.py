"""Round 115 (money and models). Round 115 (tiers). ``CostPolicy(tier_models={"lite": lite})`` with no
``minimal`` model: ``model_for("minimal")`` is the lite model ("lite serves
minimal when that has none"). A run already on the lite model whose budget
drops to the minimal tier keeps calling that same lite model, yet the
report records ``swap_model`` "lite -> minimal" and the model is told
"now on the minimal model" (a model that does not exist).

README, "The budget status line": "(and `now on the lite model` when a
`tier_models` model serves the tier; without one the run keeps its model and
no `swap_model` is recorded)"; round 97 (b): a ``swap_model`` is the run's own
change of model. Here the model never changed (lite -> lite)."""

from __future__ import annotations

import json

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.scripted import ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


async def test_lite_serving_minimal_is_no_swap_and_not_called_a_minimal_model() -> None:
    # the main model costs $1 an output token, the lite one $0.0001 an input token; cap $100
    lite = ScriptedModel([calls(("search", {"q": "b"}), inp=350_000, out=1), text("lite answer", inp=1, out=1)],
                         model="lite")
    cost = CostPolicy(cap_usd=100.0, prices={"scripted": (0.0, 1e6), "lite": (100.0, 0.0)},
                      tier_models={"lite": lite})
    h = Harness(HarnessConfig(cost=cost, disclose_budget="changes"), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"}), inp=1, out=55), text("never")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent, "go")
    report = h.last_report(agent)
    assert report is not None
    # the main model answered once ($55: 45 % left, lite tier); then the lite model twice
    # ($35 more: 10 % left, minimal tier, still served by the same lite model)
    assert len(model.calls) == 1 and len(lite.calls) == 2, (len(model.calls), len(lite.calls))
    told = json.dumps([c.formatted for c in lite.calls], ensure_ascii=False)
    swaps = [d.detail for d in report.decisions if d.action == "swap_model"]
    assert swaps == ["full -> lite ($45.00 of $100.00 left)"], f"a swap recorded where the model did not change: {swaps}"
    assert "now on the minimal model" not in told, "the model is told it is on a minimal model that does not exist"

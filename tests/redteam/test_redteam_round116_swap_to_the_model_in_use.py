"""Round 116 (red team on round 115). A run already on the model that serves the lite tier (the deployer's one cheap
model object, given to a sub-agent or an agent as its own and to
``tier_models={"lite": cheap}``) records a ``swap_model`` "full -> lite" and is
told "now on the lite model" when its budget falls to the lite tier: the model
never changed (every call before and after went to the same object).

Round 115 (``budget._model_of``): "a swap only where the model changes"; README,
"The budget status line": "without one the run keeps its model and no
`swap_model` is recorded"; round 97 (b): a ``swap_model`` is the run's own change
of model. ``_model_of(ctx, "full")`` is ``None`` (the run's own) and is compared
by identity with the tier model, never with the model the run is on."""
from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.scripted import ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


async def test_no_swap_recorded_onto_the_model_in_use() -> None:
    cheap = ScriptedModel([calls(("search", {"q": "a"}), inp=550_000, out=1), calls(("search", {"q": "b"}), inp=1, out=1),
                           text("answer", inp=1, out=1)], model="cheap")
    cost = CostPolicy(cap_usd=100.0, prices={"cheap": (100.0, 0.0)}, tier_models={"lite": cheap})
    h = Harness(HarnessConfig(cost=cost, disclose_budget="changes"), load_entry_points=False, environ={})
    agent = make_agent(cheap, [search], h.middlewares())
    await run(agent, "go")
    report = h.last_report(agent)
    assert len(cheap.calls) == 3, (report.terminal_state, report.reason, report.decisions)
    swaps = [d.detail for d in report.decisions if d.action == "swap_model"]
    told = str([c.formatted for c in cheap.calls])
    assert swaps == [] and "now on the lite model" not in told, (
        f"the run was on {agent.model.model!r} all along; swaps recorded {swaps}, "
        f"told 'now on the lite model': {'now on the lite model' in told}")

"""Round 108 (a). Round 107 took a model's input put in place into a config
(a price tuple in ``cost.prices``) as the model it was checked as, but only
when the Harness is given a ``HarnessConfig``. Given a mapping (a policy's
content, README: "Harness(config)": a HarnessConfig or a mapping) whose
values are the models themselves (``{"cost": cost, "tools": {...}}``),
``build_config`` validates ``dict(config)`` and pydantic takes a model
instance as it is (``revalidate_instances`` is "never"): what was put into it
in place is neither checked nor converted. The $0.01 cap with a price tuple
crashes every run (``'tuple' object has no attribute 'usd'``), and a
prerequisite given as a mapping crashes the gate (every call refused
``policy_error``), as round 107's test showed for the config path.

README (Configuration): "a dict or list edited in place is checked only then
[when the Harness is built], and a model's input put there (a price tuple,
a tool policy as a mapping) is taken as the model it was checked as"."""

from __future__ import annotations

import pytest

from agentscope_harness import CostPolicy, Harness, ModelPrice, Prerequisite, ToolPolicy
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text


@pytest.mark.asyncio
async def test_a_price_tuple_in_place_in_a_mapping_config_is_taken() -> None:
    RAN.clear()
    cost = CostPolicy(cap_usd=0.01, prices={"scripted": ModelPrice(1.0, 1.0)})
    cost.prices["scripted"] = (1000.0, 1000.0)  # the price went up
    try:
        h = Harness({"cost": cost}, load_entry_points=False, environ={})
    except HarnessConfigError as exc:
        assert "prices" in str(exc)
        return
    model = ScriptedModel([calls(("search", {"q": str(i)}), inp=1000, out=1000) for i in range(6)]
                          + [text("done")])
    agent = make_agent(model, [search], h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "search")
    report = h.last_report(agent)
    assert report.terminal_state.value == "incomplete" and report.reason == "budget", report
    assert len(model.calls) == 0 and RAN == []


def test_a_prerequisite_mapping_in_place_in_a_mapping_config_is_taken() -> None:
    search_policy = ToolPolicy()
    search_policy.requires.append({"tool": "lookup"})
    try:
        h = Harness({"tools": {"search": search_policy, "lookup": ToolPolicy()}}, load_entry_points=False,
                    environ={})
    except HarnessConfigError:
        return
    assert type(h.config.tools["search"].requires[0]) is Prerequisite

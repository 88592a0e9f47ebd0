"""Round 107 (b): a price tuple put into ``cost.prices`` in place passes
the Harness's check and then fails every run with ``AttributeError``.

README "Configuration": prices are "(in, out) or (in, out, cached_in) tuples
accepted"; "a dict or list edited in place is checked only then [when the
Harness is built]"; "invalid values fail at construction with the field
named". ``build_config`` checks a validated *copy* of the config
(``HarnessConfig.model_validate(_as_given(config))``) and then returns the
*original*, whose ``prices`` still holds the raw tuple. The tuple is valid, so
the check passes; at the first model call ``budget._passed`` calls
``price.usd(...)`` on the tuple and the reply raises
``AttributeError: 'tuple' object has no attribute 'usd'`` (no field named;
under ``daily_quota_usd`` the same happens in ``Fleet.before_model_call``).
The same path turns a ``ToolPolicy`` given as a mapping in place
(``config.tools["x"] = {...}``) into an ``AttributeError`` from ``Harness(...)``
that names no field. Expected: the value is taken (converted) and the cap holds,
or ``Harness(...)`` refuses it with ``HarnessConfigError`` naming
``cost.prices``."""

from __future__ import annotations

import pytest

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    ModelPrice,
    Prerequisite,
    RateLimit,
    ToolPolicy,
)
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text


@pytest.mark.asyncio
async def test_a_price_tuple_set_in_place_is_taken_or_refused_naming_the_field() -> None:
    RAN.clear()
    config = HarnessConfig(cost=CostPolicy(cap_usd=0.01, prices={"scripted": ModelPrice(1.0, 1.0)}))
    config.cost.prices["scripted"] = (1000.0, 1000.0)  # the price went up: $1,000 per million tokens
    try:
        h = Harness(config, load_entry_points=False, environ={})
    except HarnessConfigError as exc:  # refused naming the field: fine
        assert "prices" in str(exc)
        return
    model = ScriptedModel([calls(("search", {"q": str(i)}), inp=1000, out=1000) for i in range(6)]
                          + [text("done")])
    agent = make_agent(model, [search], h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "search")  # AttributeError: 'tuple' object has no attribute 'usd'
    report = h.last_report(agent)
    # a call estimated at ~$2 does not fit a $0.01 cap: no model call is made
    assert report.terminal_state.value == "incomplete" and report.reason == "budget", report
    assert len(model.calls) == 0 and RAN == []


@pytest.mark.parametrize(("edit", "read", "model"), [
    (lambda c: c.tools.__setitem__("lookup", {"role": "lookup"}), lambda c: c.tools["lookup"], ToolPolicy),
    (lambda c: c.rate_limits.append({"scope": "principal", "calls_per_min": 3}), lambda c: c.rate_limits[0],
     RateLimit),
    (lambda c: c.tools["search"].requires.append({"tool": "lookup"}), lambda c: c.tools["search"].requires[0],
     Prerequisite),
    # (a ledger some tool charges: one no tool policy names is refused, round 134)
    (lambda c: (c.ledgers.__setitem__("web", {"cap": 1}), c.tools.__setitem__("search", {"ledgers": ["web"]})),
     lambda c: c.ledgers["web"], Ledger),
])
def test_a_models_input_put_in_place_is_taken_as_the_model(edit, read, model) -> None:
    config = HarnessConfig(tools={"search": ToolPolicy(), "lookup": ToolPolicy()})
    edit(config)
    Harness(config, load_entry_points=False, environ={})
    assert type(read(config)) is model  # what the harness reads: the model, checked


def test_a_path_given_as_the_config_is_refused_saying_what_is_expected() -> None:
    with pytest.raises(HarnessConfigError, match="a HarnessConfig or a mapping .* not 'policy.yaml'"):
        Harness("policy.yaml", load_entry_points=False, environ={})  # type: ignore[arg-type]

"""Round 107 (b): the same limit listed twice shared one count, each entry
taking its unit from it. A tool's ``max_in_flight=1`` given twice refused
the first call ("search is busy: 1 calls of it are already running", with
none running); a rate limit of 2 calls a minute given twice refused the
second call; a token limit added as a second entry for the same scope halved
the call rate. A config that would silently halve (or stop) a limit is
invalid: refused at construction, naming the field (as a ledger named twice
on a tool is)."""

from __future__ import annotations

import pytest

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, RateLimit
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text


@pytest.mark.parametrize(("field", "limits"), [
    ("concurrency_limits", [ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)] * 2),
    ("concurrency_limits", [ConcurrencyLimit(scope="principal", max_in_flight=2),
                            ConcurrencyLimit(scope="principal", max_in_flight=3)]),
    ("rate_limits", [RateLimit(scope="principal", tool="search", calls_per_min=2)] * 2),
    ("rate_limits", [RateLimit(scope="principal", calls_per_min=3),
                     RateLimit(scope="principal", calls_per_min=3, tokens_per_min=100_000)]),
])
def test_a_limit_given_twice_is_refused_naming_the_field(field: str, limits: list) -> None:
    with pytest.raises(ValueError, match=rf"{field}\n.*\[1\]: a second limit on .* combine them into one entry"):
        HarnessConfig(**{field: limits})
    config = HarnessConfig()
    getattr(config, field).extend(limits)  # edited in place: refused when the Harness is built
    with pytest.raises(HarnessConfigError, match=field):
        Harness(config, load_entry_points=False, environ={})


@pytest.mark.asyncio
async def test_limits_of_different_scopes_or_tools_stand_together() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(
        concurrency_limits=[ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1),
                            ConcurrencyLimit(scope="principal", tool="search", max_in_flight=1)],
        rate_limits=[RateLimit(scope="principal", tool="search", calls_per_min=2),
                     RateLimit(scope="tenant", tool="search", calls_per_min=2)],
    ), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent)
    assert RAN == ["a", "b"]  # one in flight at a time, two a minute: both run
    assert h.last_report(agent).refusals == {}

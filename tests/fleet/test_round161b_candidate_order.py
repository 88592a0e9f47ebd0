"""Round 161 b (red team: sub-agents, the fleet and candidates together): a
candidate judged its rate and concurrency limits in its private store in the
order the live gates finished with the calls. Over Redis, concurrent calls of
one process finish the live gates in another order than Redis admitted them:
a call the live limit refused took the candidate's unit first, and a
candidate equal to the live policy reported ``refuse:rate_limited`` against
``allow``. A limit the live store judged for the call is judged as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.tool import Toolkit
from breaker_kit import redis_store, reply
from scripted import ScriptedModel, calls, make_agent, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, RateLimit
from agentscope_harness.stores import MemoryStore

LIMITS = {
    "rate": {"rate_limits": [RateLimit(scope="principal", tool="noop", calls_per_min=5)]},
    "concurrency": {"concurrency_limits": [ConcurrencyLimit(scope="tool", tool="noop", max_in_flight=2)]},
}


async def noop(q: str) -> str:
    """Look something up.

    Args:
        q (str): The query.
    """
    await asyncio.sleep(0.01)
    return f"ok {q}"


async def compared(live: HarnessConfig, candidate: HarnessConfig, *script: Any) -> tuple[list[str], list[Any]]:
    """One reply of an agent calling ``noop`` as ``script`` says (then done),
    under ``live`` with ``candidate``: the live refusals, and each difference
    as ``(live, candidate)``."""
    h = Harness(live, candidate=candidate, load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([*script, text("done")]), h.instrument(Toolkit(tools=[tool(noop)])),
                       h.middlewares())
    await reply(h, agent)
    report = h.last_report(agent)
    refused = [d.code for d in report.decisions if d.action == "refuse" and d.tool == "noop" and d.enforced]
    return refused, [(d["live"], d["candidate"]) for d in report.candidate_differences]


def batch(n: int) -> list[tuple[str, dict[str, str]]]:
    return [("noop", {"q": f"x{i}"}) for i in range(n)]


async def differences(store: object, limit: str, at_once: bool) -> tuple[list[str], list[Any]]:
    """A candidate that is its own policy: 8 calls of ``noop`` in one batch
    (``at_once``) or one a round."""
    script = [calls(*batch(8))] if at_once else [calls(one) for one in batch(8)]
    return await compared(HarnessConfig(store=store, **LIMITS[limit]), HarnessConfig(store=store, **LIMITS[limit]),
                          *script)


@pytest.mark.parametrize("limit", list(LIMITS))
async def test_a_candidate_equal_to_the_live_policy_agrees_over_memory_store(limit: str) -> None:
    refused, differ = await differences(MemoryStore(), limit, at_once=True)
    assert refused and differ == []


@pytest.mark.parametrize("limit", list(LIMITS))
async def test_a_candidate_equal_to_the_live_policy_agrees_over_redis_one_call_at_a_time(
    prefix: str, limit: str,
) -> None:
    refused, differ = await differences(redis_store(prefix), limit, at_once=False)
    assert differ == []
    assert refused if limit == "rate" else not refused  # one at a time: one in flight


@pytest.mark.parametrize("limit", list(LIMITS))
async def test_a_candidate_equal_to_the_live_policy_agrees_over_redis_for_concurrent_calls(
    prefix: str, limit: str,
) -> None:
    for _ in range(3):  # the orders differed most times, not every time
        refused, differ = await differences(redis_store(prefix), limit, at_once=True)
        assert refused and differ == []


async def test_a_stricter_candidate_still_differs_over_redis(prefix: str) -> None:
    """Its own limit, which the live store never judged, counts in its private store."""
    store = redis_store(prefix)
    _, differ = await compared(HarnessConfig(store=store), HarnessConfig(store=store, **LIMITS["rate"]),
                               calls(*batch(8)))
    assert sorted(candidate for _, candidate in differ) == ["refuse:rate_limited"] * 3
    assert {live for live, _ in differ} == {"allow"}

# Round 162 a (a red team on round 161 b): the live verdict was followed by store
# key and size alone, so a candidate whose rate waits differently (its own ``wait_s``,
# or the hook timeout its wait must end within) was reported as agreeing.
WAITS = {  # (live, candidate) configs over one store: the same key and size
    "the candidate waits longer": (
        {}, {"hook_timeout_s": 120, "wait_s": 60}, ("refuse:rate_limited", "allow")),
    "the candidate waits not at all (live in shadow mode)": (
        {"mode": "shadow", "hook_timeout_s": 120, "wait_s": 60}, {}, ("allow", "refuse:rate_limited")),
    "the candidate's hook timeout is shorter (live in shadow mode)": (
        {"mode": "shadow", "hook_timeout_s": 120, "wait_s": 60}, {"wait_s": 60}, ("allow", "refuse:rate_limited")),
}


def waiting(store: object, wait_s: float = 0.0, **config: object) -> HarnessConfig:
    limit = RateLimit(scope="tool", tool="noop", calls_per_min=2, wait_s=wait_s)
    return HarnessConfig(store=store, rate_limits=[limit], **config)


@pytest.mark.parametrize("case", list(WAITS))
async def test_a_candidate_whose_rate_waits_differently_differs(case: str) -> None:
    live, candidate, differs = WAITS[case]
    store = MemoryStore()
    # one call at a time: the third is over 2 a minute
    _, differ = await compared(waiting(store, **live), waiting(store, **candidate), *map(calls, batch(3)))
    assert differ == [differs]


async def test_a_candidate_whose_earlier_limit_differs_judges_the_next_one_itself() -> None:
    """A limit the live store never judged for the call is the candidate's own to
    judge: the live policy's first limit (one call a minute) refuses the second call
    before its second limit is judged; a candidate with the second limit alone allows
    it (60 a minute)."""
    store = MemoryStore()
    first = RateLimit(scope="tool", tool="noop", calls_per_min=1)
    second = RateLimit(scope="principal", tool="noop", calls_per_min=60)
    _, differ = await compared(HarnessConfig(store=store, rate_limits=[first, second]),
                               HarnessConfig(store=store, rate_limits=[second]), *map(calls, batch(2)))
    assert differ == [("refuse:rate_limited", "allow")]


@pytest.mark.xfail(strict=True, reason="README limit: a candidate judges after the live waits, making none")
async def test_a_candidate_without_the_live_policys_slow_rate_differs() -> None:
    """Round 163 a: live [a rate that may wait 5 s, one that may wait 0.2 s], the
    candidate the second alone, each 60 a minute. The 61st call waits about a second
    on the first, and the second has refilled meanwhile: allowed. The candidate alone
    would wait that second on its own rate (over its 0.2 s) and refuse, but it judges
    after the live wait: it allows too, and no difference is reported."""
    store = MemoryStore()
    slow = RateLimit(scope="tool", tool="noop", calls_per_min=60, wait_s=5)
    quick = RateLimit(scope="principal", tool="noop", calls_per_min=60, wait_s=0.2)
    _, differ = await compared(HarnessConfig(store=store, rate_limits=[slow, quick]),
                               HarnessConfig(store=store, rate_limits=[quick]),
                               calls(*batch(60)), calls(("noop", {"q": "last"})))
    assert differ == [("allow", "refuse:rate_limited")]

"""Exact admission: parallel batches against ledgers, ``max_tool_calls`` and
the cost budget admit exactly what is left; every call id gets exactly one
result; the refused ones say so."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from relkit import assert_context_well_formed, assert_payload_well_formed, call_ids, result_text, results_by_id
from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    MemoryStore,
    Principal,
    TerminalState,
    ToolPolicy,
)

SETTINGS = settings(max_examples=30, deadline=None)
_seq = itertools.count()


def make_search(ran: list[str]):
    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        await asyncio.sleep(0)
        ran.append(q)
        return f"found {q}"

    return search


def batches(turns: int, n: int, name: str = "search") -> list:
    """``turns`` model turns of ``n`` parallel calls each (distinct args)."""
    return [calls(*[(name, {"q": f"t{t}c{c}-{next(_seq)}"}) for c in range(n)]) for t in range(turns)]


def check_results(agent, model, admitted: int, ran: list[str]) -> None:
    assert_context_well_formed(agent)
    for call in model.calls:
        assert_payload_well_formed(call)
    results = results_by_id(agent)
    ids = call_ids(agent)
    texts = [result_text(results[i][0]) for i in ids]
    # a model meeting the refusal again is made to conclude: its calls after
    # that are refused as concluded
    refused = [t for t in texts if t.startswith(("[harness:quota_exhausted]", "[harness:run_concluded]"))]
    served = [t for t in texts if "found " in t]
    assert len(served) == admitted == len(ran)
    assert len(refused) == len(ids) - admitted
    for t in served:
        assert "[harness:" not in t.split("\n")[1]


@SETTINGS
@given(cap=st.integers(0, 6), n=st.integers(1, 6), units=st.integers(1, 3), turns=st.integers(1, 3))
async def test_ledger_admits_exactly_what_is_left(cap: int, n: int, units: int, turns: int) -> None:
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"], units=units)},
        ledgers={"r": Ledger(cap=cap)},
    ))
    ran: list[str] = []
    model = ScriptedModel(batches(turns, n) + [text("done")])
    agent = make_agent(model, [make_search(ran)], harness.middlewares())
    await run(agent)
    admitted = min(turns * n, cap // units)
    report = harness.last_report(agent)
    assert report.tool_calls.get("search", 0) == admitted
    refused_count = report.refusals.get("quota_exhausted", 0) + report.refusals.get("run_concluded", 0)
    check_results(agent, model, admitted, ran)
    assert refused_count == len(call_ids(agent)) - admitted
    assert len(harness.table) == 0


@SETTINGS
@given(limit=st.integers(0, 6), n=st.integers(1, 6), turns=st.integers(1, 3))
async def test_max_tool_calls_admits_exactly_what_is_left(limit: int, n: int, turns: int) -> None:
    harness = Harness(HarnessConfig(max_tool_calls=limit))
    ran: list[str] = []
    model = ScriptedModel(batches(turns, n) + [text("done")])
    agent = make_agent(model, [make_search(ran)], harness.middlewares())
    await run(agent)
    admitted = min(turns * n, limit)
    report = harness.last_report(agent)
    assert report.tool_calls.get("search", 0) == admitted
    check_results(agent, model, admitted, ran)
    assert len(harness.table) == 0


async def test_cap_three_batch_of_five_runs_exactly_three() -> None:
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=3)},
    ))
    ran: list[str] = []
    model = ScriptedModel(batches(1, 5) + [text("done")])
    agent = make_agent(model, [make_search(ran)], harness.middlewares())
    await run(agent)
    assert len(ran) == 3
    assert harness.last_report(agent).refusals == {"quota_exhausted": 2}
    check_results(agent, model, 3, ran)


async def test_a_later_refusal_refunds_the_ledger() -> None:
    """A call charged by spend_gate and then refused by a later gate gives
    its unit back: the next batch can still use it."""
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=2)},
    ))
    ran: list[str] = []
    same = ("search", {"q": "dup"})
    model = ScriptedModel([
        calls(same),
        calls(same),  # a duplicate: refused after being charged, then refunded
        calls(("search", {"q": "x"})),
        calls(("search", {"q": "y"})),
        text("done"),
    ])
    agent = make_agent(model, [make_search(ran)], harness.middlewares())
    await run(agent)
    report = harness.last_report(agent)
    assert ran[0] == "dup" and "x" in ran
    assert report.tool_calls["search"] == len(ran) <= 2
    assert_context_well_formed(agent)


@SETTINGS
@given(k=st.integers(1, 6), n=st.integers(1, 3))
async def test_cost_cap_admits_exactly_the_model_calls_that_fit(k: int, n: int) -> None:
    """Each model call costs ``c``, all of it its 10 output tokens (the
    request's own estimate costs nothing); with ``cap_usd`` chosen so that
    exactly ``k`` calls fit, the run makes ``k`` model calls, never spends
    past the cap, and answers with the fallback text without a (k+1)th."""
    cap = 1.0
    c = cap / (k + 0.5)
    harness = Harness(HarnessConfig(
        cost=CostPolicy(cap_usd=cap, prices={"scripted": (0.0, c * 1e6 / 10)}),
    ))
    ran: list[str] = []
    model = ScriptedModel(batches(k + 3, n) + [text("done")])
    agent = make_agent(model, [make_search(ran)], harness.middlewares())
    _, final = await run(agent)
    report = harness.last_report(agent)
    assert len(model.calls) == report.model_calls == k
    assert len(ran) == k * n
    assert final.get_text_content().startswith(harness.config.cost.fallback_text)
    assert "What I found before stopping:" in final.get_text_content()
    assert report.terminal_state == TerminalState.INCOMPLETE and report.reason == "budget"
    assert abs(report.spent_usd - k * c) < 1e-9 and report.spent_usd <= cap
    assert_context_well_formed(agent)


class SpendOnly:
    """A store of the daily spend alone: calls are charged as spent, with no
    reservation (whose estimate would not fit this test's prices; the
    reservations are tested in tests/fleet/test_harness_fleet.py)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def get_spend(self, key, day=None, *, deadline=None):
        return await self.inner.get_spend(key, day)

    async def add_spend(self, key, usd, day=None, *, deadline=None):
        return await self.inner.add_spend(key, usd, day)


async def test_daily_quota_admits_exactly_what_is_left_across_runs() -> None:
    """The principal's daily quota spans runs: each model call costs 0.1 of
    a 1.0 quota; runs go on until it is spent, then answer without a model."""
    harness = Harness(HarnessConfig(
        store=SpendOnly(),
        cost=CostPolicy(daily_quota_usd=1.0, prices={"scripted": (1000.0, 0.0)}),
    ))
    model = ScriptedModel([text("ok")], repeat=True)
    agent = make_agent(model, [make_search([])], harness.middlewares())
    answers = []
    with harness.acting_for(Principal(user_id="u", tenant="t")):
        for _ in range(14):
            _, final = await run(agent)
            answers.append(final.get_text_content())
    # spent after j calls: 0.1 j; the fallback tier starts at <= 5% left
    assert len(model.calls) == answers.count("ok") == 10
    assert answers[10:] == [harness.config.cost.fallback_text] * 4
    assert abs(await harness.store.get_spend("t/u") - 1.0) < 1e-9
    # another principal is untouched
    with harness.acting_for(Principal(user_id="v", tenant="t")):
        _, final = await run(agent)
    assert final.get_text_content() == "ok"


async def test_concurrent_runs_of_one_principal_share_the_daily_quota() -> None:
    """Each model call's price is charged to the store at once, so two runs
    of one user together overshoot the daily quota by at most one call each
    (each run reads the quota once at start and would otherwise spend it all)."""
    per_call = (100 + 10) / 1e6  # usage of a scripted call at $1 per M tokens
    quota = 8 * per_call
    store = MemoryStore()
    harness = Harness(HarnessConfig(
        store=store, cost=CostPolicy(daily_quota_usd=quota, prices={"scripted": (1.0, 1.0)}),
    ))

    async def slow_search(q: str) -> str:
        """Search slowly.

        Args:
            q (str): The query.
        """
        await asyncio.sleep(0.005)
        return f"found {q}"

    counter = iter(range(1000))

    def next_call(turn):
        return calls(("slow_search", {"q": f"q{next(counter)}"}))

    async def one(name: str):
        model = ScriptedModel([next_call], repeat=True)
        agent = make_agent(model, [slow_search], harness.middlewares(), name=name)
        with harness.acting_for(Principal(user_id="u-1")):
            await run(agent)
        return harness.last_report(agent)

    reports = await asyncio.gather(one("a"), one("b"))
    total = await store.get_spend("-/u-1")
    assert total == pytest.approx(sum(r.spent_usd for r in reports))
    assert total <= quota + 2 * per_call + 1e-12
    assert all(r.reason == "budget" for r in reports)


_PARTS = st.text(alphabet="ab/%-", max_size=4)


@given(a=st.tuples(st.none() | _PARTS, _PARTS), b=st.tuples(st.none() | _PARTS, _PARTS))
def test_two_principals_never_share_a_key(a: tuple[str | None, str], b: tuple[str | None, str]) -> None:
    """Red team: ``tenant="a/b", user_id="c"`` and ``tenant="a", user_id="b/c"``
    (and no tenant against ``tenant="-"``) shared one daily quota, rate
    limit and remembered approval: the key is one-to-one."""
    first, second = Principal(tenant=a[0], user_id=a[1]), Principal(tenant=b[0], user_id=b[1])
    assert (first.key == second.key) == (a == b)

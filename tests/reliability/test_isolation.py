"""Isolation under load: many concurrent runs share one Harness, and every
run's report counts exactly its own calls. Caps are set so that a single
count leaking from another run would refuse a call (and show up)."""

from __future__ import annotations

import asyncio
import random

from scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness.run_state import current_run

N_AGENTS = 100
CAP = 7  # the largest per-run number of calls: a leaked count would be refused
PRICE = (1.0, 2.0)  # USD per Mtok: 100 in + 10 out = 0.00012 per model call
PER_CALL_USD = (100 * 1.0 + 10 * 2.0) / 1_000_000


def config() -> HarnessConfig:
    return HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval", ledgers=["r"]),
            "lookup": ToolPolicy(role="lookup", ledgers=["r"]),
        },
        ledgers={"r": Ledger(cap=CAP)},
        max_tool_calls=CAP,
        cost=CostPolicy(cap_usd=1.0, prices={"scripted": PRICE}),
        stall_rounds=10,  # the results only echo their query: not what is tested here
    )


def plan(i: int) -> list[list[tuple[str, dict]]]:
    """Agent ``i``'s tool-call turns: ``i % 7 + 1`` calls, split into
    parallel batches of varying size, alternating two tools."""
    n = i % 7 + 1
    turns: list[list[tuple[str, dict]]] = []
    k = 0
    width = i % 3 + 1  # 1 (sequential turns), 2 or 3 parallel calls per turn
    while k < n:
        turn = []
        for _ in range(min(width, n - k)):
            name = "search" if k % 2 == 0 else "lookup"
            turn.append((name, {"q": f"a{i}-c{k}"}))
            k += 1
        turns.append(turn)
    return turns


def tools(ran: list[tuple[str, str, str | None]], harness: Harness):
    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        await asyncio.sleep(random.random() * 0.004)
        run = current_run()
        who = harness.current_principal()
        ran.append((q, run.run_id if run else "?", who.user_id if who else None))
        return f"found {q}"

    async def lookup(q: str) -> str:
        """Look up.

        Args:
            q (str): The key.
        """
        await asyncio.sleep(random.random() * 0.004)
        run = current_run()
        who = harness.current_principal()
        ran.append((q, run.run_id if run else "?", who.user_id if who else None))
        return f"value of {q}"

    return [search, lookup]


def expected_counts(turns: list[list[tuple[str, dict]]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for turn in turns:
        for name, _ in turn:
            out[name] = out.get(name, 0) + 1
    return out


async def test_hundred_concurrent_replies_on_one_harness_are_isolated() -> None:
    harness = Harness(config())
    ran: list[tuple[str, str, str | None]] = []
    agents, models, turns_of = [], [], []
    for i in range(N_AGENTS):
        turns = plan(i)
        model = ScriptedModel([calls(*t) for t in turns] + [text(f"answer {i}")])
        agents.append(make_agent(model, tools(ran, harness), harness.middlewares(), name=f"a{i}"))
        models.append(model)
        turns_of.append(turns)

    async def one(i: int):
        with harness.acting_for(Principal(user_id=f"u{i}", tenant=f"t{i % 5}")):
            return await run(agents[i], f"task {i}")

    results = await asyncio.gather(*(one(i) for i in range(N_AGENTS)))

    assert len(harness.table) == 0
    total_calls = 0
    run_ids = set()
    for i, (_, final) in enumerate(results):
        turns = turns_of[i]
        report = harness.last_report(agents[i])
        assert final.get_text_content() == f"answer {i}"
        assert report.terminal_state == TerminalState.COMPLETED, (i, report.reason)
        assert report.tool_calls == expected_counts(turns), i
        assert sum(report.tool_calls.values()) == i % 7 + 1
        assert report.model_calls == len(turns) + 1, i
        assert report.refusals == {}, (i, report.refusals)
        assert report.input_tokens == 100 * (len(turns) + 1)
        assert abs(report.spent_usd - PER_CALL_USD * (len(turns) + 1)) < 1e-12
        assert report.principal["user_id"] == f"u{i}"
        assert report.in_flight == []
        run_ids.add(report.run_id)
        # the model saw exactly its own results, unfenced text intact
        seen = [m for c in models[i].calls for m in tool_messages(c)]
        assert all(f"a{i}-c" in m for m in seen)
        assert not any(f"a{j}-" in m for j in range(N_AGENTS) if j != i for m in seen[-1:])
        total_calls += i % 7 + 1
    assert len(run_ids) == N_AGENTS
    # every call ran inside its own run, for its own principal
    assert len(ran) == total_calls
    by_run = {harness.last_report(a).run_id: i for i, a in enumerate(agents)}
    for q, run_id, user in ran:
        i = by_run[run_id]
        assert q.startswith(f"a{i}-c") and user == f"u{i}"
    assert harness.breakers == {}


async def test_sequential_replies_of_one_agent_each_start_fresh() -> None:
    harness = Harness(config())
    ran: list[tuple[str, str, str | None]] = []
    model = ScriptedModel([])
    agent = make_agent(model, tools(ran, harness), harness.middlewares())
    run_ids = []
    for r in range(9):
        turns = plan(r * 5 + 6)  # 7, 5, 3, 1, 6, 4, 2, 7, 5 calls
        model.script = [calls(*t) for t in turns] + [text(f"reply {r}")]
        before = len(model.calls)
        with harness.acting_for(Principal(user_id=f"seq{r}")):
            _, final = await run(agent, f"again {r}")
        report = harness.last_report(agent)
        assert final.get_text_content() == f"reply {r}"
        assert report.terminal_state == TerminalState.COMPLETED
        assert report.tool_calls == expected_counts(turns)
        assert report.model_calls == len(turns) + 1 == len(model.calls) - before
        assert report.refusals == {}
        assert abs(report.spent_usd - PER_CALL_USD * (len(turns) + 1)) < 1e-12
        assert report.principal["user_id"] == f"seq{r}"
        assert len(harness.table) == 0
        run_ids.append(report.run_id)
    assert len(set(run_ids)) == 9
    assert [r.run_id for r in harness.reports][-9:] == run_ids


async def test_one_harness_serves_many_agents_and_their_replies_interleaved() -> None:
    """Several replies per agent, agents concurrently: still exact."""
    harness = Harness(config())
    ran: list[tuple[str, str, str | None]] = []
    agents = []
    for a in range(10):
        model = ScriptedModel([])
        agents.append((make_agent(model, tools(ran, harness), harness.middlewares(), name=f"s{a}"), model))

    async def series(a: int) -> list[tuple[int, dict, int]]:
        agent, model = agents[a]
        out = []
        for r in range(4):
            turns = plan(a * 4 + r)
            model.script = [calls(*t) for t in turns] + [text("ok")]
            with harness.acting_for(Principal(user_id=f"s{a}r{r}", tenant="x")):
                await run(agent, "go")
            report = harness.last_report(agent)
            out.append((a * 4 + r, report, len(turns)))
            assert report.principal["user_id"] == f"s{a}r{r}"
        return out

    for results in await asyncio.gather(*(series(a) for a in range(10))):
        for i, report, n_turns in results:
            assert report.tool_calls == expected_counts(plan(i))
            assert report.model_calls == n_turns + 1
            assert report.refusals == {}
    assert len(harness.table) == 0


async def test_concurrent_principals_see_only_their_own_identity() -> None:
    harness = Harness(HarnessConfig(
        tools={"orders": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})},
    ))
    seen: dict[str, list[str]] = {}

    async def orders(user_id: str) -> str:
        """Orders of a user.

        Args:
            user_id (str): Whose orders.
        """
        await asyncio.sleep(random.random() * 0.005)
        who = harness.current_principal().user_id
        assert current_run().principal.user_id == who
        seen.setdefault(who, []).append(user_id)
        return f"orders of {user_id}"

    async def one(i: int):
        me, other = f"p{i}", f"p{(i + 1) % 40}"
        model = ScriptedModel([
            calls(("orders", {"user_id": me}), ("orders", {"user_id": other})),
            text("done"),
        ])
        agent = make_agent(model, [orders], harness.middlewares(), name=f"p{i}")
        with harness.acting_for(Principal(user_id=me, tenant="shop")):
            await asyncio.sleep(random.random() * 0.002)
            await run(agent, "my orders")
            assert harness.current_principal().user_id == me
        msgs = tool_messages(model.calls[1])  # concurrent: completion order
        denied = [m for m in msgs if m.startswith("[harness:permission_denied]")]
        served = [m for m in msgs if m not in denied]
        assert len(denied) == 1 and len(served) == 1
        assert f"orders of {me}\n" in served[0] and other not in served[0]
        return harness.last_report(agent)

    reports = await asyncio.gather(*(one(i) for i in range(40)))
    assert harness.current_principal() is None
    for i, report in enumerate(reports):
        assert report.principal["user_id"] == f"p{i}"
        assert report.tool_calls == {"orders": 1}
        assert report.refusals == {"permission_denied": 1}
    assert seen == {f"p{i}": [f"p{i}"] for i in range(40)}
    assert len(harness.table) == 0

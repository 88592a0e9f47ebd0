"""Red team, round 85: shadow mode and candidate policies.

Shadow mode's report ended ``completed`` where enforcing ends ``incomplete``
on a stop made just before a model call (a USD or token cap the call's
estimate would pass, the daily quota's reservation, a model rate limit), and
an identical candidate then reported a difference there; a ledger's
``on_exhausted="ask"`` was recorded as a refusal, not the ``ask`` the README
says; shadow mode still waited for rate limits (a wait that pushed a call
past the deadline changed the user's answer); a candidate's daily quota made
the live run wait on the live store (one that hangs held it to its
deadline)."""

import asyncio
import time

import pytest
from agentscope.tool import Toolkit
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    ModelPrice,
    Principal,
    RateLimit,
    ToolPolicy,
)
from agentscope_harness.stores import MemoryStore, RedisStore

# --------------------------------------------- a stop made before a model call

async def long_search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q} " + " ".join(f"{q}{i}" for i in range(400))


long_search.__name__ = "search"  # the name AgentScope gives the tool


PRICE = {"scripted": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)}
CASES = {
    # the ladder never reaches its last rung; the fourth call's estimate does not fit
    "cap_usd": dict(cost=CostPolicy(cap_usd=0.002, prices=PRICE)),
    "max_input_tokens": dict(cost=CostPolicy(max_input_tokens=1500, prices=PRICE)),
    # the principal's daily quota: a later call's reservation does not fit
    "daily_quota_usd": dict(cost=CostPolicy(daily_quota_usd=0.006, prices=PRICE)),
    # 2 model calls a minute: the third is refused
    "model_rate": dict(rate_limits=[RateLimit(scope="principal", calls_per_min=2)]),
}


async def _drive_capped(mode: str, kw: dict):
    h = Harness(HarnessConfig(mode=mode, store=MemoryStore(), **kw), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("The answer.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(long_search)])), h.middlewares())
    with h.acting_for(Principal(user_id="u1", tenant="t")):
        _, final = await run(agent, "q")
    return h.last_report(agent), final.get_text_content(), len(model.calls)


@pytest.mark.parametrize("case", list(CASES))
async def test_shadow_report_ends_as_the_enforcing_run(case: str) -> None:
    enforced, _, enforced_calls = await _drive_capped("enforce", CASES[case])
    shadow, shadow_answer, shadow_calls = await _drive_capped("shadow", CASES[case])
    # the enforcing harness stops the run before one of its later model calls
    assert enforced.terminal_state.value == "incomplete" and 1 < enforced_calls < 4, (
        enforced.terminal_state.value, enforced.reason, enforced_calls)
    # shadow: the model's answer is delivered (right), and the stop is recorded ...
    assert shadow_answer == "The answer." and shadow_calls == 4
    assert any(d.action in ("fallback", "stop") and not d.enforced for d in shadow.decisions)
    # ... but the report must end as enforcing did
    assert (shadow.terminal_state.value, shadow.reason) == (enforced.terminal_state.value, enforced.reason), (
        shadow.terminal_state.value, shadow.reason)


@pytest.mark.parametrize("case", ["cap_usd", "max_input_tokens"])
async def test_a_candidate_equal_to_a_shadow_live_policy_agrees_on_the_capped_call(case: str) -> None:
    """README "Candidate policies": "With the live policy in shadow mode, the
    candidate is compared with what the live policy would have refused"."""
    kw = CASES[case]
    h = Harness(HarnessConfig(mode="shadow", store=MemoryStore(), **kw), candidate=HarnessConfig(**kw),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("The answer.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(long_search)])), h.middlewares())
    with h.acting_for(Principal(user_id="u1", tenant="t")):
        await run(agent, "q")
    report = h.last_report(agent)
    assert report.candidate_differences == [], report.candidate_differences


# ----------------------------------------------------- a ledger's ask

SEARCHED: list[str] = []


async def ledgered_search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    SEARCHED.append(q)
    return f"found {q}"


ledgered_search.__name__ = "search"  # the name AgentScope gives the tool


def ledger_policy(mode: str) -> HarnessConfig:
    return HarnessConfig(mode=mode, tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
                         ledgers={"r": Ledger(cap=2, on_exhausted="ask")})


async def _drive_ledgered(mode: str, candidate: HarnessConfig | None = None):
    SEARCHED.clear()
    h = Harness(ledger_policy(mode), candidate=candidate, load_entry_points=False, environ={})
    model = ScriptedModel([*(calls(("search", {"q": q})) for q in "abc"), text("The answer.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(ledgered_search)])), h.middlewares())
    _, final = await run(agent, "q")
    return h.last_report(agent), final.get_text_content()


async def test_enforcing_asks() -> None:  # control
    report, _ = await _drive_ledgered("enforce")
    assert report.terminal_state.value == "waiting_input"
    assert [(d.hook, d.action) for d in report.decisions if d.tool == "search" and d.point == "pre_tool_call"] == [
        ("spend_gate", "ask")]


async def test_shadow_records_the_ask_and_runs_the_call() -> None:
    report, final = await _drive_ledgered("shadow")
    assert SEARCHED == ["a", "b", "c"] and final == "The answer."  # runs: right
    gate = [(d.action, d.code) for d in report.decisions if d.hook == "spend_gate"]
    assert gate == [("ask", None)], gate  # actual: [("refuse", "quota_exhausted")]


async def test_a_candidate_equal_to_the_shadow_live_policy_agrees() -> None:
    report, _ = await _drive_ledgered("shadow", candidate=ledger_policy("enforce"))
    assert report.candidate_differences == [], report.candidate_differences


# ------------------------------------------------------ rate-limit waits

STARTED: list[tuple[str, float]] = []


async def slow_search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    STARTED.append((q, time.monotonic()))
    await asyncio.sleep(0.6)  # the backend takes 0.6 s
    return f"found {q}"


slow_search.__name__ = "search"  # the name AgentScope gives the tool


RATE = RateLimit(scope="tool", tool="search", calls_per_min=60, wait_s=5)


async def _drain(store: MemoryStore) -> None:
    """Earlier traffic of the fleet took the minute's 60 units (one batch of
    60 parallel calls under an enforcing Harness on the same store)."""
    h = Harness(HarnessConfig(store=store, rate_limits=[RATE]), load_entry_points=False, environ={})
    batch = calls(*[("search", {"q": f"q{i}"}) for i in range(60)])

    async def search_fast(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        return q

    search_fast.__name__ = "search"
    agent = make_agent(ScriptedModel([batch, text("ok")]), h.instrument(Toolkit(tools=[tool(search_fast)])),
                       h.middlewares(), name="earlier")
    await run(agent, "warm")


@pytest.mark.parametrize("mode", ["bare", "shadow"])
async def test_shadow_mode_does_not_hold_a_call_for_a_rate_limit(mode: str) -> None:
    store = MemoryStore()
    await _drain(store)
    STARTED.clear()
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("The K2 kettle.")])
    if mode == "bare":
        agent = make_agent(model, Toolkit(tools=[tool(slow_search)]))
    else:
        h = Harness(HarnessConfig(mode="shadow", store=store, rate_limits=[RATE], deadline_s=1.5),
                    load_entry_points=False, environ={})
        agent = make_agent(model, h.instrument(Toolkit(tools=[tool(slow_search)])), h.middlewares())
    t0 = time.monotonic()
    _, final = await run(agent, "which kettle?")
    assert STARTED and STARTED[0][1] - t0 < 0.3, "the tool was held before it ran"
    assert final.get_text_content() == "The K2 kettle."


# ---------------------------------------------------- a candidate's quota

async def plain_search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q}"


plain_search.__name__ = "search"  # the name AgentScope gives the tool


async def _blackhole():
    """A TCP server that accepts connections and never answers (a Redis
    that hangs)."""
    conns = []

    async def handle(reader, writer):
        conns.append(writer)
        while await reader.read(1024):  # read every command, answer none
            pass

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], conns


@pytest.mark.parametrize("with_candidate", [False, True])
async def test_a_candidates_quota_never_holds_the_live_run(with_candidate: bool) -> None:
    server, port, conns = await _blackhole()
    try:
        store = RedisStore(f"redis://127.0.0.1:{port}/0", timeout_s=2.0)
        live = HarnessConfig(store=store, deadline_s=1.5)
        candidate = HarnessConfig(cost=CostPolicy(daily_quota_usd=5.0,
                                                  prices={"scripted": ModelPrice(input_per_mtok=1, output_per_mtok=1)}))
        h = Harness(live, candidate=candidate if with_candidate else None, load_entry_points=False, environ={})
        model = ScriptedModel([text("The answer.")])
        agent = make_agent(model, h.instrument(Toolkit(tools=[tool(plain_search)])), h.middlewares())
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with h.acting_for(Principal(user_id="u1", tenant="t")):
            _, final = await run(agent, "q")
        took = loop.time() - t0
        report = h.last_report(agent)
        assert final.get_text_content() == "The answer."
        assert (report.terminal_state.value, report.reason) == ("completed", "answered")
        assert took < 0.5
    finally:
        for w in conns:
            w.close()
        server.close()

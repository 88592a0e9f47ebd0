"""Red team, round 90 (on round 89). The caller cancels the reply while a tool's reranker call (a 100k-token
request, $0.10 at $1/M) is out at the provider. The same cancellation during
the agent's own model call charges that call's request (control). The side
call is charged nothing: ``generate_structured_output`` lets
``CancelledError`` through (AgentScope's ``__call__`` swallows it into an
interrupted response, which the main path charges), ``_count_attempts``
records no usage for an attempt ended by a ``BaseException``, so
``_attempts_usage`` returns ``None`` and ``guarded_call``'s ``finally``
settles the reservation at $0; ``model_calls`` counts it all the same."""

import asyncio
from typing import Any

from agentscope.message import UserMsg
from scripted import ALICE, Ids, ScriptedModel, SlowModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

BIG = "x" * 400_000  # ~100k tokens by the harness's own estimate: $0.10 at $1/M


async def _cancelled(side: bool) -> tuple[Any, float, SlowModel]:
    reranker = SlowModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=100_000, out=0)],
                         model="rer", delay=5.0)

    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        res = await reranker.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
        return str(res.content)

    if side:
        base = SlowModel([calls(("lookup", {"q": "a"}), inp=10, out=10), text("done")], model="base")
    else:
        base = SlowModel([text("done")], model="base", delay=5.0)
    store = MemoryStore()
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=100.0, daily_quota_usd=300.0,
                                                           prices={"base": (1.0, 1.0), "rer": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(base, [lookup], h.middlewares())

    async def reply() -> None:
        with h.acting_for(ALICE):
            await run(agent, "look it up" if side else BIG)

    task = asyncio.create_task(reply())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if (reranker if side else base).requests_out:
            break
    await asyncio.sleep(0.1)
    task.cancel()
    try:
        await task
    except BaseException:
        pass
    return h.last_report(agent), await store.get_spend(ALICE.key), reranker


async def test_control_the_agents_own_call_cancelled_is_charged_its_request() -> None:
    report, spent_today, _ = await _cancelled(side=False)
    assert report.spent_usd >= 0.09 and spent_today >= 0.09, (report.spent_usd, spent_today)


async def test_a_side_call_cancelled_in_flight_is_charged_its_request() -> None:
    report, spent_today, reranker = await _cancelled(side=True)
    assert reranker.requests_out == 1
    got = (report.model_calls, report.spent_usd, spent_today, report.terminal_state.value)
    assert report.spent_usd >= 0.09, got
    assert spent_today >= 0.09, got


async def test_a_tool_bounding_its_reranker_with_a_timeout_pays_for_each_request() -> None:
    """A tool that bounds its reranker (``asyncio.timeout(0.2)``, a common
    pattern) cancels the side call at the provider: three 100k-token requests
    ($0.30 by the harness's own estimate) go out under a $0.25 cap; each is
    charged $0, so none is refused and the run completes."""
    reranker = SlowModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=100_000, out=0)],
                         model="rer", delay=5.0, repeat=True)

    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        try:
            async with asyncio.timeout(0.2):
                res = await reranker.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
            return str(res.content)
        except TimeoutError:
            return "reranker too slow: vector order"
        except Exception as exc:  # ModelCallRefused
            return f"not reranked: {exc}"

    base = ScriptedModel([calls(("lookup", {"q": q}), inp=10, out=10) for q in "abc"] + [text("done")],
                         model="base")
    store = MemoryStore()
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=0.25, daily_quota_usd=300.0,
                                                           prices={"base": (1.0, 1.0), "rer": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    agent = make_agent(base, [lookup], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "look it up")
    report = h.last_report(agent)
    got = (reranker.requests_out, report.model_calls, report.spent_usd, report.terminal_state.value)
    assert reranker.requests_out <= 2, got  # the third does not fit in $0.25 once two are charged
    assert report.spent_usd >= 0.09 * reranker.requests_out, got

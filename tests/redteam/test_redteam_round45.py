"""Round 45: a helper ran today's changes on two workers sharing one store
(memory, SQLite file, Redis). Each break, held here.

- a model call a later limit refused kept the worst-case tokens an earlier
  limit gave it: a principal was locked out with no token billed;
- the unused worst case went back in the background, so the other worker
  judged its next call against the whole of it.
"""

from __future__ import annotations

from typing import Any

from scripted import ALICE, BOB, ScriptedModel, make_agent, run, text
from test_redteam_round40 import refund

from agentscope_harness import Harness, HarnessConfig, RateLimit


def worker(store: Any, *scopes: str) -> Harness:
    limits = [RateLimit(scope=scope, tokens_per_min=10_000) for scope in scopes]  # type: ignore[arg-type]
    return Harness(HarnessConfig(store=store, rate_limits=limits), load_entry_points=False)


async def reply(h: Harness, who: Any, inp: int, out: int) -> str:
    agent = make_agent(ScriptedModel([text("An answer.", inp=inp, out=out)]), [refund], h.middlewares())
    with h.acting_for(who):
        await run(agent)
    report = h.last_report(agent)
    assert report is not None
    return report.reason


async def test_a_call_a_later_limit_refused_holds_none_of_an_earlier_ones_tokens(two_workers: Any) -> None:
    store_a, store_b = two_workers
    a, b = worker(store_a, "principal", "tenant"), worker(store_b, "principal", "tenant")
    assert await reply(b, BOB, 8_900, 100) == "answered"  # Bob, of Alice's tenant, bills 9,000
    assert [await reply(a, ALICE, 100, 10) for _ in range(3)] == ["rate_limited"] * 3  # the tenant's are spent
    # Alice billed nothing this minute: her own 10,000 are all there
    assert await store_a.rate_acquire(f"rate:model:tokens:principal:{ALICE.key}", 10_000, 9_000) <= 0


async def test_two_workers_see_what_the_other_did_not_use(two_workers: Any) -> None:
    workers = [worker(store, "principal") for store in two_workers]
    reasons = [await reply(workers[i % 2], ALICE, 300, 20) for i in range(10)]  # 3,200 of 10,000 billed
    assert reasons == ["answered"] * 10

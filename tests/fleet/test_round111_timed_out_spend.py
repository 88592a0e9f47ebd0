"""Round 111 (fleet). A model attempt that timed out after its request went out is charged its
request in the run's report, but that charge never reaches the principal's
daily spend in the shared store when the retry is cut at the run's deadline.

Setup: one worker on the shared RedisStore, ``daily_quota_usd`` set,
``deadline_s=0.8``; AgentScope's real ``OpenAIChatModel`` (real ``openai``
client, real HTTP, client timeout 0.5 s, ``max_retries=1``) against a local
OpenAI-compatible server that answers slowly. Attempt 1 times out at 0.5 s
(``APITimeoutError``: its request went out, the harness charges it, README:
"each attempt is charged"); AgentScope retries; attempt 2 is cut by the
run's deadline at 0.8 s (charged its request through the reservation).

``ModelGuard.call`` charges the timed-out attempt through
``_charge_unanswered`` -> ``Harness.charge_usage`` with no reservation, i.e.
``store.add_spend`` bounded by the run's deadline, which has passed: the
charge is dropped ("daily spend not charged: spend store is unavailable (no
time left before the deadline)", though the store is up), never retried.
The report says $X spent, the store holds $X/2: the principal's daily
quota under-counts real, billed spend (README, Running many workers: "A
settle the store does not take is retried ... so spend is never dropped
while the process lives"; fleet.settle: "money spent is charged even after
the deadline")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import Toolkit
from pydantic import SecretStr

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import RedisStore
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, drain, make_agent, search, tool

pytestmark = pytest.mark.asyncio

PRICES = {"gpt-main": (1.0, 1.0)}


async def timed_out_twice(store: RedisStore) -> Any:
    """One reply whose first attempt the client's timeout cuts (0.5 s, its
    request out: charged, no reservation holding it) and whose retry the
    deadline cuts (0.8 s); its report."""
    server = FakeOpenAI()
    await server.start()
    try:
        server.plan(Reply(text="late", delay_s=5), Reply(text="late", delay_s=5))
        harness = Harness(HarnessConfig(
            store=store, deadline_s=0.8,
            cost=CostPolicy(prices=PRICES, daily_quota_usd=1.0, max_output_tokens=100),
        ), load_entry_points=False, environ={})
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
            model="gpt-main", stream=False, max_retries=1, retry_delay=0.01,
            client_kwargs={"max_retries": 0, "timeout": 0.5},
        )
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(search)])), harness.middlewares())
        with harness.acting_for(ALICE):
            await drain(agent, UserMsg("user", "hi"))
        return harness.last_report(agent)
    finally:
        await server.close()


async def test_a_timed_out_attempt_is_charged_to_the_daily_spend(redis_url: str, prefix: str) -> None:
    store = RedisStore(redis_url, prefix=prefix)
    report = await timed_out_twice(store)
    await asyncio.sleep(0.5)  # any background settle has landed
    in_store = await store.get_spend(ALICE.key)
    dropped = [d.detail for d in report.decisions if d.code == "dependency_down"]
    assert report.model_calls == 2 and report.spent_usd > 0
    # what the run spent (its report) is what the principal's daily spend counts
    assert in_store == pytest.approx(report.spent_usd), (in_store, report.spent_usd, dropped)


class _AddFailsOnce(RedisStore):
    """A Redis store that cannot answer the first ``add_spend`` (a restart)."""

    failed = 0

    async def add_spend(self, key: str, usd: float) -> float:
        if not self.failed:
            self.failed += 1
            raise ConnectionError("the store is restarting")
        return await super().add_spend(key, usd)


async def test_a_charge_the_store_did_not_take_is_added_later(redis_url: str, prefix: str) -> None:
    """The same charge while the store cannot answer: kept and added in the
    background once it can, never dropped."""
    store = _AddFailsOnce(redis_url, prefix=prefix)
    report = await timed_out_twice(store)
    assert store.failed == 1
    assert any("retried until the store takes it" in d.detail for d in report.decisions)
    await asyncio.sleep(1.5)  # the background retry (first after 1 s)
    assert await store.get_spend(ALICE.key) == pytest.approx(report.spent_usd)

"""Round 152 c (scenarios: "Running many workers", the stores and the CLI; about 30 held).

1. README "What fails closed": "budgets, reservations and limits refuse with
   `dependency_down` (the user is told a service it needs is unavailable ...)", and a run
   whose dependency went down ends `incomplete` (`dependency_down`) with the fallback,
   "not the model's text". Attack: a tool's `RateLimit` or `ConcurrencyLimit` on a Redis
   that is down; the model, refused, makes its answer up. Seen: the made-up answer was
   delivered, `completed`; an open breaker's same refusal ended the run as promised.
   Fixed: `Fleet.acquire_tool` marks the tool's dependency down, as the breaker gate does.
2. "Everything recovers without a restart". Attack: a worker's `SQLiteStore` file is
   removed while it runs. Seen: SQLite made a new, empty file and every call after it was
   `no such table`: each run under a daily quota ended `dependency_down` until a restart.
   Fixed: the schema is made again and the call made once more (the day's spend starts
   again, as on a Redis restarted empty).
"""
from __future__ import annotations

import os
import socket
from typing import Any

import pytest
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    RateLimit,
    RedisStore,
    SQLiteStore,
    TerminalState,
)
from agentscope_harness.testing import ScriptedModel, calls, text
from tests.scripted import ALICE, ALLOW, make_agent, run

pytestmark = pytest.mark.asyncio

STORE_DOWN = HarnessConfig().fallback_text.format(reason="a service it needs is unavailable")


LOOKED_UP: list[str] = []


async def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    LOOKED_UP.append(order_id)
    return "paid"


def dead_redis_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.mark.parametrize("limit", [
    {"rate_limits": [RateLimit(scope="principal", tool="lookup", calls_per_min=5)]},
    {"concurrency_limits": [ConcurrencyLimit(scope="tool", tool="lookup", max_in_flight=2)]},
], ids=["rate", "concurrency"])
async def test_a_tool_limit_the_store_cannot_check_ends_the_run_dependency_down(limit: dict[str, Any]) -> None:
    h = Harness(HarnessConfig(store=RedisStore(dead_redis_url(), timeout_s=0.5), **limit),
                load_entry_points=False, environ={})
    ran = LOOKED_UP
    ran.clear()
    model = ScriptedModel([calls(("lookup", {"order_id": "A1"})), text("Order A1 is paid and on its way.")])
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(lookup, permission=ALLOW)]))
    agent = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "is A1 paid?")
    report = h.last_report(agent)
    assert ran == [] and model.calls[-1].tool_results[0].startswith("[harness:dependency_down]")
    assert final.get_text_content().startswith(STORE_DOWN)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down")


async def test_a_sqlite_store_whose_file_was_removed_recovers_without_a_restart(tmp_path: Any) -> None:
    path = str(tmp_path / "fleet.db")
    h = Harness(HarnessConfig(store=SQLiteStore(path, timeout_s=0.5),
                              cost=CostPolicy(prices={"scripted": (2.0, 8.0)}, daily_quota_usd=5.0,
                                              max_output_tokens=100)), load_entry_points=False, environ={})

    async def one_reply(answer: str) -> Any:
        agent = make_agent(ScriptedModel([text(answer)]), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent)
        return h.last_report(agent)

    assert (await one_reply("one")).reason == "answered"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    again = await one_reply("again")
    assert (again.terminal_state, again.reason) == (TerminalState.COMPLETED, "answered")
    assert os.path.exists(path)
    assert await h.store.get_spend(ALICE.key) == pytest.approx(again.spent_usd)


@pytest.mark.parametrize("hook_timeout_s, waited", [(0.5, False), (5.0, True)])
async def test_a_tools_wait_s_is_bounded_by_its_gates_hook_timeout(hook_timeout_s: float, waited: bool) -> None:
    """README: a limited tool call waits up to its `wait_s` within the deadline and
    0.8 x `hook_timeout_s`. 60 calls a minute: the 61st of one batch waits a second."""
    rate = RateLimit(scope="tool", tool="lookup", calls_per_min=60, wait_s=15)
    h = Harness(HarnessConfig(rate_limits=[rate], hook_timeout_s=hook_timeout_s), load_entry_points=False, environ={})
    ran = LOOKED_UP
    ran.clear()
    batch = [("lookup", {"order_id": f"A{i}"}) for i in range(61)]
    model = ScriptedModel([calls(*batch), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(lookup, permission=ALLOW)])), h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "check them all")
    limited = [r for r in model.calls[1].tool_results if r.startswith("[harness:rate_limited]")]
    assert len(ran) == (61 if waited else 60) and len(limited) == (0 if waited else 1), (len(ran), limited)

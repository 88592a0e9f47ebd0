"""Round 184 (a red team on session 44's store naming): a store of yours
whose method raises at once, before returning anything to await (a
connection check in a plain method), escaped the harness. With a daily quota
its ``reserve_spend`` raising crashed the reply; its ``breaker_allow`` or
``breaker_record`` raising failed the breaker hook as ``policy_error`` instead
of falling back to this process's breaker. README "What fails closed":
"budgets, reservations and limits refuse with `dependency_down`"; hook 12:
"Store down: this process's breaker decides (logged)". The store's methods
are now called inside the bound (``stores.store_call``), so their raising is
the store being down, named by its class."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore


class RaisesAtOnce:
    """A custom store: a ``MemoryStore`` but for ``method``, which raises
    ``error`` when called (``CancelledError``: round 185, a store's own, with
    nobody cancelling its caller)."""

    timeout_s = 0.5

    def __init__(self, method: str, error: type[BaseException] = ConnectionError) -> None:
        self.inner, self.method, self.error = MemoryStore(), method, error

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "method", "error"):
            raise AttributeError(name)
        if name != self.method:
            return getattr(self.inner, name)

        def down(*args: Any, **kwargs: Any) -> Any:
            raise self.error("cannot reach the database")

        return down


ERRORS = pytest.mark.parametrize("error", [ConnectionError, asyncio.CancelledError])


async def test_the_callers_own_cancellation_still_cancels_a_store_call() -> None:
    """A store that waits, and the caller cancels: that cancellation is the
    caller's (the run ends ``cancelled``), never the store being down."""
    store = RaisesAtOnce("reserve_spend")

    async def slow(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(10)

    store.__dict__["reserve_spend"] = slow
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    model = ScriptedModel([text("Sure.")])
    agent = make_agent(model, [], h.middlewares())
    with h.acting_for(ALICE):
        task = asyncio.ensure_future(run(agent, "hi"))
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    report = h.last_report(agent)
    assert (report.terminal_state.value, model.calls) == ("cancelled", [])
    assert "dependency_down" not in {d.code for d in report.decisions}


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    return f"found {q}"


@ERRORS
async def test_a_reservation_raising_at_once_fails_the_run_closed(error: type[BaseException]) -> None:
    store = RaisesAtOnce("reserve_spend", error)
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    model = ScriptedModel([text("Sure.")])
    agent = make_agent(model, [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "hi")  # the reply ends, it does not raise
    report = h.last_report(agent)
    assert (report.reason, model.calls) == ("dependency_down", [])
    said = [d.detail for d in report.decisions if d.code == "dependency_down"]
    assert any("spend store (RaisesAtOnce) is unavailable" in d for d in said), said


@ERRORS
@pytest.mark.parametrize("method", ["breaker_allow", "breaker_record"])
async def test_a_breaker_store_raising_at_once_falls_back_to_this_process(
    method: str, error: type[BaseException],
) -> None:
    h = Harness(HarnessConfig(store=RaisesAtOnce(method, error)), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "x"})), text("Done.")])
    agent = make_agent(model, [lookup], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "hi")
    report = h.last_report(agent)
    assert final.get_text_content() == "Done." and report.tool_calls == {"lookup": 1}
    assert "policy_error" not in {d.code for d in report.decisions}
    fallbacks = [d.detail for d in report.decisions if d.action == "breaker_fallback"]
    assert any("breaker store (RaisesAtOnce)" in d for d in fallbacks), [str(d) for d in report.decisions]

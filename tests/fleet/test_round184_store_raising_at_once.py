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

from typing import Any

import pytest
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore


class RaisesAtOnce:
    """A custom store: a ``MemoryStore`` but for ``method``, which raises when called."""

    timeout_s = 0.5

    def __init__(self, method: str) -> None:
        self.inner, self.method = MemoryStore(), method

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "method"):
            raise AttributeError(name)
        if name != self.method:
            return getattr(self.inner, name)

        def down(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("cannot reach the database")

        return down


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    return f"found {q}"


async def test_a_reservation_raising_at_once_fails_the_run_closed() -> None:
    store = RaisesAtOnce("reserve_spend")
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(daily_quota_usd=5.0, prices={"scripted": (1.0, 1.0)})),
                load_entry_points=False, environ={})
    model = ScriptedModel([text("Sure.")])
    agent = make_agent(model, [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "hi")  # the reply ends, it does not raise
    report = h.last_report(agent)
    assert (report.reason, model.calls) == ("dependency_down", [])
    said = [d.detail for d in report.decisions if d.code == "dependency_down"]
    assert any("spend store (RaisesAtOnce) is unavailable" in d and "cannot reach" in d for d in said), said


@pytest.mark.parametrize("method", ["breaker_allow", "breaker_record"])
async def test_a_breaker_store_raising_at_once_falls_back_to_this_process(method: str) -> None:
    h = Harness(HarnessConfig(store=RaisesAtOnce(method)), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "x"})), text("Done.")])
    agent = make_agent(model, [lookup], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "hi")
    report = h.last_report(agent)
    assert final.get_text_content() == "Done." and report.tool_calls == {"lookup": 1}
    assert "policy_error" not in {d.code for d in report.decisions}
    fallbacks = [d.detail for d in report.decisions if d.action == "breaker_fallback"]
    assert any("breaker store (RaisesAtOnce)" in d for d in fallbacks), [str(d) for d in report.decisions]

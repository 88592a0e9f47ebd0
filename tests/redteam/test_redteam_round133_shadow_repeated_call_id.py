"""Round 133 (a): shadow mode refuses a call whose id another call of its batch
holds (``call_id_check``): bare AgentScope runs it.

README, HarnessConfig ``mode``: "``shadow``: decide and record, refuse nothing".
README, Security: "**Shadow mode** refuses nothing". DESIGN §6.5:
"``HARNESS_MODE=shadow`` runs every gate and records what it *would* do, but
refuses nothing: for rolling a new policy out on live traffic".

Attack: a provider that numbers its call ids per message (``call_0`` twice in
one parallel batch: some OpenAI-compatible servers do) and an ordinary outer
middleware that awaits in ``on_acting`` (an audit log's write), so both calls
are judged before either runs. Bare AgentScope runs both tools. Under a shadow
Harness ``HarnessToolAdapter.on_check_permission`` denies the second call
(``flow.id_taken``: ``[harness:duplicate_call] ... was not made``) whatever the
mode: the decision is recorded ``enforced=False`` but the call is refused, the
tool never runs and the model reads a sentinel. A refusal in shadow mode that the
report says was not enforced.

Real ``Agent``, real tools in a real instrumented ``Toolkit``, scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit

import agentscope_harness.testing as harness_testing
from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio


class AwaitingAudit(MiddlewareBase):
    """An ordinary outer middleware that awaits before passing a call on."""

    async def get_middleware_key(self) -> str:
        return "audit"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> AsyncGenerator:
        await asyncio.sleep(0.01)
        async for item in next_handler(**input_kwargs):
            yield item


def _tools(ran: list[str]) -> list[Any]:
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(f"search:{q}")
        return f"results for {q}"

    async def stock(sku: str) -> str:
        """Stock of an item.

        Args:
            sku (str): The item.
        """
        ran.append(f"stock:{sku}")
        return f"{sku}: 4 in stock"

    return [tool(search), tool(stock)]


async def _drive(monkeypatch: Any, mode: str | None) -> tuple[list[str], list[str], Any]:
    ran: list[str] = []
    monkeypatch.setattr(harness_testing, "_call_id", lambda: "call_0")  # the provider numbers ids per message
    model = ScriptedModel([calls(("search", {"q": "boots"}), ("stock", {"sku": "B-7"})), text("Boots: B-7, 4 left.")])
    toolkit = Toolkit(tools=_tools(ran))
    h = None
    if mode is None:
        agent = make_agent(model, toolkit, middlewares=[AwaitingAudit()])
        await run(agent, "boots in stock?")
    else:
        h = Harness(HarnessConfig(mode=mode, tools={"search": ToolPolicy(role="retrieval"),
                                                    "stock": ToolPolicy(role="lookup")}),
                    load_entry_points=False, environ={})
        agent = make_agent(model, h.instrument(toolkit), middlewares=[AwaitingAudit(), *h.middlewares()])
        with h.acting_for(ALICE):
            await run(agent, "boots in stock?")
    return sorted(ran), tool_messages(model.calls[1]), (h.last_report(agent) if h else None)


@pytest.mark.xfail(strict=True, reason="README limit: the call-id refusals stay on in shadow mode")
async def test_shadow_mode_runs_a_call_under_a_repeated_id(monkeypatch: Any) -> None:
    bare_ran, bare_told, _ = await _drive(monkeypatch, None)
    assert bare_ran == ["search:boots", "stock:B-7"], bare_ran  # bare AgentScope runs both

    ran, told, report = await _drive(monkeypatch, "shadow")
    recorded = [(d.hook, d.code, d.enforced) for d in report.decisions if d.action == "refuse"]
    assert ran == bare_ran, f"shadow ran {ran}; the model read {told}; refusals recorded {recorded}"
    assert not any("[harness:" in t for t in told), told

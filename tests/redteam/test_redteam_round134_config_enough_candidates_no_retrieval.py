"""Round 134 (a): ``enough_candidates`` with no ``retrieval`` tool constructs fine
and never binds.

README, Configuration: "A config that would silently disable a limit is invalid
too" (``require_finish_tool=True`` without a finish tool is refused: "no run could
ever complete"). README hooks table, ``search_gate``: enough candidates refuses more
retrieval (``enough_results``); ``enough_candidates``: "``search_gate`` threshold".

Attack: ``enough_candidates=2`` with the only search tool configured as
``role="lookup"`` (and a ``count_results`` that reports 5 hits a call). The gate is
attached only to ``retrieval`` tools, and no tool in ``tools`` has that role, so
the threshold can never bind: the config, the ``Harness`` and ``instrument`` all
succeed and the search runs three times past "enough".

Real ``Agent``, real tool in a real instrumented ``Toolkit``, scripted model."""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit
from pydantic import ValidationError

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

SEARCHED: list[str] = []


async def find_products(q: str) -> str:
    """Find products.

    Args:
        q (str): The query.
    """
    SEARCHED.append(q)
    return "\n".join(f"{q}-{i}: product {q} number {i}" for i in range(5))


async def test_enough_candidates_without_a_retrieval_tool_is_refused_or_binds() -> None:
    SEARCHED.clear()
    try:
        h = Harness(HarnessConfig(
            enough_candidates=2,
            tools={"find_products": ToolPolicy(role="lookup", count_results=lambda out: out.count("\n") + 1)},
        ), load_entry_points=False, environ={})
    except (ValidationError, HarnessConfigError) as exc:
        assert "enough_candidates" in str(exc)
        return
    model = ScriptedModel([*(calls(("find_products", {"q": q})) for q in ("shoe", "boot", "clog")),
                           text("Here are some.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(find_products)])), h.middlewares())
    await run(agent, "find footwear")
    report = h.last_report(agent)
    refused = [d.code for d in report.decisions if d.action == "refuse"]
    assert "enough_results" in refused, (
        f"enough_candidates=2 built fine; find_products ran {len(SEARCHED)} times ({SEARCHED}), "
        f"refusals={refused}"
    )


async def test_control_the_same_tool_as_retrieval_is_gated() -> None:
    SEARCHED.clear()
    h = Harness(HarnessConfig(
        enough_candidates=2,
        tools={"find_products": ToolPolicy(role="retrieval", count_results=lambda out: out.count("\n") + 1)},
    ), load_entry_points=False, environ={})
    model = ScriptedModel([*(calls(("find_products", {"q": q})) for q in ("shoe", "boot", "clog")),
                           text("Here are some.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(find_products)])), h.middlewares())
    await run(agent, "find footwear")
    assert "enough_results" in [d.code for d in h.last_report(agent).decisions if d.action == "refuse"]

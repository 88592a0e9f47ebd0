"""A customer lookup whose record a cache placed before the harness's serves
(rounds 145 a, 146 a): ``served_agent(cached, script, *more)`` builds the
agent (``lookup`` with ``pii={"email": "block"}``; ``more`` tools beside it);
``RAN`` records each lookup the tool itself made."""

from __future__ import annotations

from typing import Any

from agentscope.tool import ToolBase, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ResultCache, ScriptedModel, make_agent, tool

EMAIL = "maria.gonzalez@example.org"
KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
RECORD = f"customer: {EMAIL} (crm api_key={KEY})"
RAN: list[str] = []


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    RAN.append(q)
    return RECORD


def served_agent(cached: bool, script: list[Any], *more: Any) -> tuple[Harness, ScriptedModel, Any]:
    """The harness, the model and the agent; with ``cached``, a cache first
    serves every ``lookup`` with the record."""
    RAN.clear()
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "block"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel(script)
    cache = [ResultCache({"lookup": RECORD})] if cached else []
    tools = [tool(lookup), *(t if isinstance(t, ToolBase) else tool(t) for t in more)]
    agent = make_agent(model, h.instrument(Toolkit(tools=tools)), [*cache, *h.middlewares()])
    return h, model, agent

"""Round 107 (e). A run breaks the provider's prefix cache once (the
pruner rewrites old results), then parks on a payment's confirmation. Its
provisional report says ``prefix_breaks == 1``. The confirmation reaches
another worker (a new Harness on the same SQLite file, the agent's state
restored): the final report keeps the ``prefix_break`` decision but says
``prefix_breaks == 0``. The same resume in the parking process says 1.

README, "Cache-bust detection": a break "is a ``prefix_break`` decision ...
counted in ``RunReport.prefix_breaks``". README, "Human in the loop": a reply
parked in another process "goes on from exactly where it was, as a resume in
the parking process does ... call and token counts, spend, ... and its
report's decisions".

Cause: ``park_record.NOT_CARRIED`` lists ``prefix`` (``RunState.prefix``, whose
``PrefixTrack.breaks`` ``outcome.build_report`` reads) among "this process's
objects", while the decisions it counted are carried (``_RUN["decisions"]``):
the resumed report's count starts again at 0 beside the carried decisions."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text, tool

pytestmark = pytest.mark.asyncio

PAID: list[int] = []


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"{q}: " + " ".join(f"word{q}{i}" for i in range(80))


async def pay(amount: int) -> str:
    """Pay.

    Args:
        amount (int): How much.
    """
    PAID.append(amount)
    return f"paid {amount}"


@pytest.mark.parametrize("where", ["same_worker", "other_worker"])
async def test_prefix_breaks_survive_a_resume(tmp_path: Path, where: str) -> None:
    PAID.clear()
    path = str(tmp_path / "shared.db")

    def worker() -> Harness:
        config = HarnessConfig(
            store=SQLiteStore(path), prune_over_tokens=200, keep_last=1,
            tools={"pay": ToolPolicy(role="mutation", ask_when=lambda a: "over 50" if a["amount"] > 50 else None)},
        )
        return Harness(config, load_entry_points=False, environ={})

    def toolkit(h: Harness) -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(search), tool(pay)]))

    here = worker()
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), calls(("pay", {"amount": 80})), text("Paid 80.")])
    agent = make_agent(model, toolkit(here), here.middlewares(), name="lead")
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "research, then pay 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    parked = here.last_report(agent)
    assert parked.terminal_state.value == "waiting_input"
    assert parked.prefix_breaks == 1  # the pruner's rewrite broke the prefix once

    there = here
    if where == "other_worker":
        there = worker()
        agent = make_agent(model, toolkit(there), there.middlewares(), name="lead",
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with there.acting_for(ALICE):
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    report = there.last_report(agent)
    assert PAID == [80] and report.terminal_state.value == "completed"
    breaks = [d for d in report.decisions if d.action == "prefix_break"]
    assert len(breaks) == 1  # the decision is carried
    assert report.prefix_breaks == len(breaks), (report.prefix_breaks, [d.detail for d in breaks])

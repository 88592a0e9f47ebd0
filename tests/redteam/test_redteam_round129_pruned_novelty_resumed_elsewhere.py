"""Round 129 d: a pruned result is read as news again once its park is
answered on another worker, so the stall the parking worker would report is
never told to the model.

Promise (README, hook 20 `drift_result_tracker`: a result repeated word for
word is never progress, "a run remembers its last 4,096 results whole";
Security / Human in the loop: a reply parked in another process "goes on
from exactly where it was, as a resume in the parking process does ... what
its results said (novelty) is read again from the results of the reply's own
message in the restored context (what the run that never moved knew)").

Attack: four large pages are read; the pruner replaces page 0 with its
placeholder; an `export` then parks for a human (`ask_when`). After the
"yes" the model fetches page 0 again (allowed: its result was pruned) and
twice more (refused as duplicates). `stall_rounds=2`.

What happens: answered on the parking worker, page 0 again is no news, and
before its last call the model is told "The last 2 rounds brought nothing
new". Answered on a second worker (same SQLite store, state restored),
`lifecycle._recall_results` rebuilt novelty from the restored context, where
page 0 is only `[pruned: ...]`: the same page reads as news and the model is
never told it stalled. (The run's prune spacing is not carried either: the
second worker prunes four results at its first round.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.asyncio

from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text, tool, tool_messages

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore


async def export(table: str) -> str:
    """Export a table.

    Args:
        table (str): The table.
    """
    return f"export of {table}: " + " ".join(f"row{i}" for i in range(30))


async def fetch(page: int) -> str:
    """Fetch a page.

    Args:
        page (int): The page.
    """
    return f"page {page}: " + " ".join(f"p{page}w{i}" for i in range(150))


async def _last_payload(tmp_path: Path, elsewhere: bool) -> str:
    path = str(tmp_path / f"shared-{elsewhere}.db")

    def worker() -> Harness:
        config = HarnessConfig(
            store=SQLiteStore(path), prune_over_tokens=500, keep_last=1,
            loop_window=40, loop_threshold=40, stall_rounds=2,
            tools={"export": ToolPolicy(ask_when=lambda args: "each export needs a yes")},
        )
        return Harness(config, load_entry_points=False, environ={})

    def toolkit(h: Harness) -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(export), tool(fetch)]))

    here = worker()
    model = ScriptedModel(
        [calls(("fetch", {"page": i})) for i in range(4)]
        + [calls(("export", {"table": "orders"}))]
        + [calls(("fetch", {"page": 0})) for _ in range(3)] + [text("done")],
    )
    agent = make_agent(model, toolkit(here), here.middlewares())
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "read the pages, then export orders"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    assert tool_messages(model.calls[-1])[0].startswith("[pruned: an earlier result of fetch")  # page 0
    h = here
    if elsewhere:
        h = worker()
        agent = make_agent(model, toolkit(h), h.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with h.acting_for(ALICE):
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    return json.dumps(model.calls[-1].formatted)


@pytest.mark.xfail(strict=True, reason="README limit: what a pruned result said is not known on another worker")
async def test_a_pruned_page_fetched_again_is_no_news_on_another_worker_either(tmp_path: Path):
    stalled = "rounds brought nothing new"
    assert stalled in await _last_payload(tmp_path, elsewhere=False)  # where it parked: told it stalled
    assert stalled in await _last_payload(tmp_path, elsewhere=True)  # elsewhere: the same story

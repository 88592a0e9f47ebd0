"""Round 129 d: a confirmed call whose earlier result was pruned is refused
as a duplicate when the park is answered on another worker.

Promise (README, hook table row 11 `repeat_call_gate`): an identical call
that already succeeded is refused `duplicate_call` only while "its result
[is] still in the context the model read (a result pruned, or compressed
into AgentScope's summary, may be fetched again)". README, Security / Human
in the loop: a reply parked in another process "goes on from exactly where
it was, as a resume in the parking process does".

Attack: `export` asks a human each time (`ask_when`). The model exports
`orders` (confirmed, runs), reads four large pages, and the pruner replaces
the export's result with `[pruned: ...]`. The model exports `orders` again
(it can no longer read it): the parking worker admits the call and parks it
for the human. The human's "yes" reaches a second worker (same SQLite store,
state restored).

What happens: answered on the parking worker the export runs again; answered
on the second worker the confirmed call is refused `[harness:duplicate_call]
... reuse its earlier result`, a result the model can only read as the
pruner's placeholder. The run's prune set (`ResultAccount.pruned`) is not
carried, and `repeat_call_gate._still_read` falls back to `ref not in
results.pruned` before the resumed run's first `pre_think`.
"""

from __future__ import annotations

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

EXPORTED: list[str] = []


async def export(table: str) -> str:
    """Export a table.

    Args:
        table (str): The table.
    """
    EXPORTED.append(table)
    return f"export of {table}: " + " ".join(f"row{i}" for i in range(60))


async def fetch(page: int) -> str:
    """Fetch a page.

    Args:
        page (int): The page.
    """
    return f"page {page}: " + " ".join(f"p{page}w{i}" for i in range(150))


async def _second_export(tmp_path: Path, elsewhere: bool) -> tuple[list[str], str]:
    EXPORTED.clear()
    path = str(tmp_path / f"shared-{elsewhere}.db")

    def worker() -> Harness:
        config = HarnessConfig(
            store=SQLiteStore(path), prune_over_tokens=500, keep_last=1,
            loop_window=40, loop_threshold=40, stall_rounds=30,
            tools={"export": ToolPolicy(ask_when=lambda args: "each export needs a yes")},
        )
        return Harness(config, load_entry_points=False, environ={})

    def toolkit(h: Harness) -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(export), tool(fetch)]))

    here = worker()
    model = ScriptedModel(
        [calls(("export", {"table": "orders"}))]
        + [calls(("fetch", {"page": i})) for i in range(4)]
        + [calls(("export", {"table": "orders"})), text("done")],
    )
    agent = make_agent(model, toolkit(here), here.middlewares())
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "export orders, read the pages, export again"))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    with here.acting_for(ALICE):
        items = await drain(agent, confirm(ask, ask.tool_calls[0]))
    ask = next(i for i in items if isinstance(i, RequireUserConfirmEvent))  # the second export waits
    # the first export's result is pruned: the model cannot read it any more
    assert tool_messages(model.calls[-1])[0].startswith("[pruned: an earlier result of export")
    assert EXPORTED == ["orders"]
    h = here
    if elsewhere:
        h = worker()
        agent = make_agent(model, toolkit(h), h.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with h.acting_for(ALICE):
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    return list(EXPORTED), tool_messages(model.calls[-1])[-1]


async def test_confirmed_call_with_a_pruned_result_runs_on_another_worker_as_here(tmp_path: Path):
    here, _ = await _second_export(tmp_path, elsewhere=False)
    assert here == ["orders", "orders"]  # answered where it parked: the export runs again
    there, seen = await _second_export(tmp_path, elsewhere=True)
    assert not seen.startswith("[harness:duplicate_call]"), seen
    assert there == ["orders", "orders"], there

"""Round 152 b (scenarios: "Budgets users can see", about 25 held).

1. README, Configuration, `store`: `SQLiteStore(path)` is a file, an in-memory database
   is refused. Attack: the in-memory database written as an SQLite URI (the bundled
   SQLite reads URIs in any filename). Seen: accepted; every call met a new, empty
   database, so each run under a daily quota ended `dependency_down`. Fixed: the store
   checks at construction that a second connection sees the schema.
2. README "Ask a human": with `CostPolicy(on_exhausted="ask")` the agent's next reply
   "continues the task under the extended budget ... what the parked run spent carried
   over". Attack: `cap_usd=0.05, max_output_tokens=3000`; the first reply spends 1,000
   output tokens and parks on the dollar cap; a human approves $5. Seen: the continued
   run had a fresh 3,000 output tokens (4,000 in all): approving dollars lifted the
   operator's token cap. Fixed: the parked task's tokens are carried too.
"""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Principal, SQLiteStore, TerminalState
from tests.scripted import RAN, ScriptedModel, calls, make_agent, run, search

U42 = Principal(user_id="u-42", tenant="acme")


@pytest.mark.parametrize("path", ["file::memory:", "file::memory:?cache=shared", "file:spend.db?vfs=memdb"])
def test_an_in_memory_database_written_as_a_uri_is_refused(path: str, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="path must name a database file"):
        SQLiteStore(path)


def test_a_database_file_is_still_taken(tmp_path: Any) -> None:
    store = SQLiteStore(str(tmp_path / "spend.db"))
    assert (tmp_path / "spend.db").exists() and store.path == str(tmp_path / "spend.db")


class Big(ScriptedModel):
    class Parameters(BaseModel):
        max_tokens: int = 1000


def searching_harness() -> tuple[Harness, Big]:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.05, max_output_tokens=3000, on_exhausted="ask",
                                              prices={"scripted": (1.0, 30.0)})),
                load_entry_points=False, environ={})
    return h, Big(lambda turn: calls(("search", {"q": f"q{len(RAN)}"}), inp=100, out=1000))


@pytest.mark.asyncio
async def test_an_approved_usd_extension_keeps_the_tasks_token_caps() -> None:
    h, model = searching_harness()
    agent = make_agent(model, [search], h.middlewares())
    with h.acting_for(U42):
        await run(agent, "find kettles")
    parked = h.last_report(agent)
    assert parked.terminal_state is TerminalState.WAITING_INPUT and parked.output_tokens == 1000
    with h.acting_for(U42):
        h.extend(agent, usd=5.0)
        await run(agent, "go on")
    continued = h.last_report(agent)
    assert continued.extensions
    assert parked.output_tokens + continued.output_tokens == 3000, (parked.output_tokens, continued.output_tokens)
    assert (continued.terminal_state, continued.reason) == (TerminalState.INCOMPLETE, "budget")
    told = [d.detail for d in continued.decisions]
    assert any("1000 of 3000 output tokens left" in detail for detail in told), told

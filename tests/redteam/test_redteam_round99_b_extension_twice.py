"""Red team, round 99 (b): one approved budget extension is spent once per
worker that holds the agent's state.

``CostPolicy(cap_usd=0.010, on_exhausted="ask")``: Alice's reply spends
$0.0096 and parks on the budget question (worker A). A human approves
$0.010 more (``harness.extend`` in this process, the state saved as JSON).
Alice's "go on" reaches two workers at once (a retried request, two tabs:
each loads the saved state, as production serves a message). Before, each took the
extension and spent it: $0.0096 + 2 x $0.0096 against the $0.020 the human
approved (the extension lived only in the agent's state). Now the parked
budget is claimed once fleet-wide (``Fleet.claim_parked_budget``): one reply
continues it with the extension, the other carries its spend and asks again.

Real worker processes, real ``Agent``s, real tools in a real ``Toolkit``,
one SQLite file or one Redis."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agentscope.state import AgentState
from round99_b_worker import kinds, make_agent, result, spawn, store_spec

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, Principal
from agentscope_harness.stores import RedisStore, SQLiteStore
from agentscope_harness.testing import ScriptedModel

ALICE = Principal(user_id="u-42", tenant="acme")
CAP, MORE = 0.010, 0.010
COST = {"cap_usd": CAP, "on_exhausted": "ask"}
SCRIPT = [["calls", "lookup", {"q": "a"}, {"inp": 4000}], ["calls", "lookup", {"q": "b"}, {"inp": 5600}],
          *[["calls", "lookup", {"q": q}, {"inp": 1500}] for q in "cdefghij"], ["text", "done"]]


@pytest.mark.parametrize("kind", kinds())
def test_one_extension_is_spent_once_across_workers(kind: str, tmp_path: Path) -> None:
    st = store_spec(kind, tmp_path)
    go = str(tmp_path / "go")
    parked, extended = str(tmp_path / "parked.json"), str(tmp_path / "extended.json")
    base = {"mode": "first", "store": st, "config": {"cost": COST}, "script": SCRIPT}
    goers = [spawn({**base, "name": f"go-on-{i}", "go": go, "state_in": extended,
                    "state_out": str(tmp_path / f"after-{i}.json"), "say": "go on"}) for i in range(2)]
    first = result(spawn({**base, "name": "A", "state_out": parked}))
    assert first["report"]["state"] == "waiting_input"

    # the human approves $0.010 more, in this process, on the state as stored
    store = SQLiteStore(st["path"]) if kind == "sqlite" else RedisStore(st["url"], prefix=st["prefix"])
    here = Harness(HarnessConfig(store=store, cost=CostPolicy(cap_usd=CAP, on_exhausted="ask",
                                                               prices={"scripted": ModelPrice(1.0, 1.0)})),
                   load_entry_points=False, environ={})
    agent = make_agent(here, ScriptedModel([]),
                       state=AgentState.model_validate_json(json.loads(Path(parked).read_text())["state"]))
    with here.acting_for(ALICE):
        here.extend(agent, usd=MORE)
    Path(extended).write_text(json.dumps({"state": agent.state.model_dump_json()}))
    time.sleep(0.05)
    Path(go).write_text("1")

    later = [result(p)["report"] for p in goers]
    if kind == "redis":  # this test's keys go
        import redis

        client = redis.Redis.from_url(st["url"])
        for key in client.scan_iter(f"{st['prefix']}:*"):
            client.delete(key)
        client.close()
    spent = first["report"]["spent"] + sum(r["spent"] for r in later)
    # what the human approved is what may be spent: the cap plus one extension, once
    assert spent <= CAP + MORE + 1e-9, (spent, [(r["state"], r["spent"], r["extensions"]) for r in later])
    assert sum(len(r["extensions"]) for r in later) == 1
    loser = next(r for r in later if not r["extensions"])  # carried the spend, not the extension: asked again
    assert loser["state"] == "waiting_input" and loser["spent"] <= CAP - first["report"]["spent"] + 1e-9, loser

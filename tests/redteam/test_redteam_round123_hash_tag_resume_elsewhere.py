"""Round 123 (personal data). `hash` mode is documented "stable within a run" (README, Personal data:
"`hash` (stable within a run, different across runs)"; pii.hash_tag: "the same
value gives the same tag under one salt (so the model can still match it across
results)"). A reply parked for a confirmation and answered on another worker
"goes on from exactly where it was, as a resume in the parking process does"
(README, Human in the loop; "Running many workers": give every worker the same
config and one shared store). But the salt (outputs.pii_salt) is
HMAC(_RUN_KEY, run_id:nonce) and `_RUN_KEY` is drawn per process
(`secrets.token_bytes(32)` at import). So after the resume on another worker
(a separate process here), the same customer's email in the confirmed call's
result gets another tag than in the result the model read before the park: the
model can no longer tell it is the same customer. Resumed on the parking
worker, the tags match (control).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg

from tests.redteam.hash_worker_kit import ALICE, TAG, resume, toolkit, worker
from tests.scripted import ScriptedModel, calls, drain, make_agent, text

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.asyncio


async def _park(db: str):
    here = worker(db)
    model = ScriptedModel([calls(("find_customer", {"name": "Alice"})),
                           calls(("pay_out", {"customer": "Alice", "amount": 80})),
                           text("Paid.")])
    agent = make_agent(model, toolkit(here), here.middlewares())
    with here.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "find Alice and pay her 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    before = [t for m in model.calls[-1]["formatted"] if m["role"] == "tool" for t in TAG.findall(str(m["content"]))]
    return here, agent, asked, before


async def test_control_resumed_in_the_parking_process(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.db")
    _, agent, asked, before = await _park(db)
    out = await resume(db, agent.state.model_dump_json(), asked.model_dump_json())  # same process
    assert out["end"] == ["completed", "answered"], out
    assert len(out["tags"]) == 2 and out["tags"][0] == out["tags"][1] == before[0], out


async def test_same_email_same_tag_after_a_resume_on_another_worker(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.db")
    _, agent, asked, before = await _park(db)
    (tmp_path / "state.json").write_text(agent.state.model_dump_json())
    (tmp_path / "asked.json").write_text(asked.model_dump_json())
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.redteam.hash_worker_kit",
         db, str(tmp_path / "state.json"), str(tmp_path / "asked.json")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["end"] == ["completed", "answered"], out
    assert len(out["tags"]) == 2
    assert out["tags"][0] == out["tags"][1], f"one customer, two tags within one run: {out['tags']}"

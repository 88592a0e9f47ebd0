"""Round 157 c red team on round 156 c's ``Candidate._shadow``: a parked run resumed.

README "Candidate policies": `Harness(config, candidate=new_config)` "judges a second policy in
shadow on the same traffic (tool gates ...); differences are `candidate_differs` decisions and
`RunReport.candidate_differences`"; "a sub-agent resumed from its lead's next reply counts in that
reply, as live". "Ask a human": a parked reply resumes on another worker from the saved state
(its counts carried in the park record: `tool_calls_total`, ...). A policy compared with itself
must differ nowhere (rounds 154, 156 c fixed such cases).

``Candidate._shadow`` opens a fresh shadow for the resumed run (a new ``RunState``) whose own
``tool_calls_total`` (kept own, not mirrored: ``_MIRRORED_RUN``) starts at 0, while the live run
carries its count from the park record.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, RAN, ScriptedModel, calls, confirm, drain, make_agent, search, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.redteam.park_kit import resumed
from tests.redteam.test_redteam_round156c_candidate_resumed_sub_agent import refund

pytestmark = pytest.mark.asyncio




def _config(path: str | None) -> HarnessConfig:
    extra = {} if path is None else {"store": SQLiteStore(path)}
    return HarnessConfig(max_tool_calls=2, tools={"refund": ToolPolicy(role="mutation",
                                                                      ask_when=lambda a: "refunds need a human")},
                         **extra)


def _worker(path: str) -> Harness:
    return Harness(_config(path), candidate=_config(None), load_entry_points=False, environ={})


def _toolkit(h: Harness) -> Toolkit:
    return h.instrument(Toolkit(tools=[tool(search), tool(refund)]))


@pytest.mark.parametrize("fresh", [False, True], ids=["same_worker", "fresh_worker"])
async def test_a_policy_compared_with_itself_differs_nowhere_after_a_resume(tmp_path: Path, fresh: bool) -> None:
    """Attack: live and candidate are one policy (`max_tool_calls=2`, refunds asked). The run
    searches (1 call), asks about the refund and parks; the human approves (on a fresh worker
    sharing the store, as a web app does); the refund runs (2), the model searches again: the
    live policy refuses it (`quota_exhausted`, 2 of 2 used). Happened (fresh worker): the
    candidate's shadow of the resumed run counts its calls from 0 (refund = 1), allows the
    search: `candidate_differs` "live: refuse:quota_exhausted; candidate: allow" for a candidate
    identical to the live policy. Should: no difference."""
    path = str(tmp_path / "fleet.db")
    model = ScriptedModel([calls(("search", {"q": "policy"})), calls(("refund", {"order_id": "A-1"})),
                           calls(("search", {"q": "again"})), text("Refunded."), text("x")])
    a = _worker(path)
    first = make_agent(model, _toolkit(a), a.middlewares())
    with a.acting_for(ALICE):
        items = await drain(first, UserMsg("user", "refund A-1"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    if fresh:
        saved = first.state.model_dump_json()
        b = _worker(path)
        second = resumed(model, b, _toolkit(b), saved)
    else:
        b, second = a, first
    with b.acting_for(ALICE):
        await drain(second, confirm(asked, asked.tool_calls[0]))
    report = b.last_report(second)
    refused = [(d.hook, d.code, d.tool) for d in report.decisions if d.action == "refuse"]
    assert "refund:A-1" in RAN and ("spend_gate", "quota_exhausted", "search") in refused, (RAN, refused)
    assert report.candidate_differences == [], report.candidate_differences

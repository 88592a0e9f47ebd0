"""Round 156 c: a candidate policy and a sub-agent resumed from its lead's next reply.

README "Budgets users can see": a sub-agent "answers to its own caps and to those of
every run it is nested in (`max_model_calls`, `max_tool_calls`, ...; a sub-agent parked in
one lead reply and resumed from the lead's next answers to the next)". "Candidate
policies": `Harness(config, candidate=new_config)` judges a second policy in shadow on the
same traffic; differences are `candidate_differs` decisions / `candidate_differences`;
"it counts the calls and spend of its own Harness's runs and of runs nested in them".
A policy compared with itself must differ nowhere (round 154 fixed such a case).

`Candidate._shadow` fixes a sub-agent's shadow parent when first seen; `RunState
.nest_on_resume` re-nests the live run in the lead's next reply, but the candidate keeps
judging it against the old (settled) lead reply's counters.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit
from scripted import ALICE, RAN, ScriptedModel, calls, make_agent, parking_tools, run, search, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

pytestmark = pytest.mark.asyncio


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return f"refunded {order_id}"


def _config() -> HarnessConfig:
    return HarnessConfig(max_tool_calls=2,
                         tools={"refund": ToolPolicy(ask_when=lambda a: "refunds need a human")})


async def test_a_policy_compared_with_itself_differs_nowhere_for_a_sub_agent_resumed_in_the_next_reply() -> None:
    """Attack: live and candidate are the same policy (`max_tool_calls=2`, refunds asked).
    Lead reply 1 delegates; the sub-agent parks its refund. Lead reply 2 searches, then
    resumes the sub-agent (2 of 2 calls used in reply 2), whose approved refund is a third
    call of reply 2: the live policy refuses it (`quota_exhausted`, as the README says it
    answers to the next reply). The candidate still judges it against reply 1's counts (1
    call) and allows it: `candidate_differs` "live: refuse:quota_exhausted; candidate:
    allow" for a candidate identical to the live policy. Should: no difference."""
    h = Harness(_config(), candidate=_config(), load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("Refunded."), text("ok"),
                                      text("ok")]),
                       h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="child")
    delegate, resume, asks = parking_tools(child)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund A-1"})), text("Waiting for approval."),
                                     calls(("search", {"q": "policy"})), calls(("resume", {"task": "go"})),
                                     text("Done."), text("Done.")]),
                      h.instrument(Toolkit(tools=[tool(delegate), tool(resume), tool(search)])),
                      h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "refund A-1")
        assert asks, "the sub-agent parked its refund"
        await run(lead, "approved, go on")
    child_report = h.last_report(child)
    lead_report = h.last_report(lead)
    refused = [(d.hook, d.code) for d in child_report.decisions if d.action == "refuse"]
    assert "refund:A-1" not in RAN and ("spend_gate", "quota_exhausted") in refused, (RAN, refused)
    assert lead_report.candidate_differences == [], lead_report.candidate_differences
    assert child_report.candidate_differences == [], child_report.candidate_differences

"""Round 144 b (scenarios: sub-agents). README "Security", Secrets: tool results are
redacted "(... and the result's metadata, ..., its personal data as the tool's `pii`
says: it streams to the UI in the result's end event and stays in the context)"; a
sub-agent ends visibly "in the result of the tool call that ran it
(`metadata["harness"]["sub_runs"]`: ... `reason`)"; `record_raw` is about decision
details and the report only.

Attack: one Harness with `record_raw=True` and `tools={"delegate":
ToolPolicy(pii={"email": "redact"})}`; a safety hook stops the sub-agent with a reason
naming a customer's e-mail; the lead's `delegate` returns text without it.
What happened: `sub_runs[0].reason` in the delegate result's metadata carried the raw
e-mail to the UI (`TOOL_RESULT_END`) and the context: it was scrubbed of secrets only,
never given the tool's `pii`, unlike every other metadata string.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import ToolResultEndEvent
from agentscope.message import UserMsg

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
EMAIL = "grace.hopper@example.com"


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): Query.
    """
    return f"found {q}"


@harness_hook("pre_tool_call", priority=25, name="fraud_stop", kind="safety")
def fraud_stop(ctx: Any) -> None:
    if ctx.tool.name == "lookup":
        ctx.stop(f"customer {EMAIL} is on the fraud list", TerminalState.INCOMPLETE)


@pytest.mark.parametrize("pii", [{"email": "redact"}, {}], ids=["tool_pii", "control_no_pii"])
async def test_a_sub_runs_reason_gets_the_tools_pii(pii: Any) -> None:
    h = Harness(HarnessConfig(record_raw=True, tools={"delegate": ToolPolicy(pii=pii)}),
                hooks=[fraud_stop], load_entry_points=False, environ={})
    sub = make_agent(ScriptedModel([calls(("lookup", {"q": "x"})), text("sub done")]), [lookup],
                     h.middlewares(), name="sub")

    async def delegate(task: str) -> str:
        """Delegate a task to the checker.

        Args:
            task (str): The task.
        """
        await sub.reply(UserMsg("lead", task))
        return "the checker has finished"

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")]), [delegate],
                      h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        events, _ = await run(lead, "check the customer")
    ends = json.dumps([e.model_dump(mode="json") for e in events if isinstance(e, ToolResultEndEvent)])
    assert "sub_runs" in ends and "fraud list" in ends
    assert (EMAIL in ends) is (not pii), ends

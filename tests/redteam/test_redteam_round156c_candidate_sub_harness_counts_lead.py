"""Round 156 c: a sub-agent Harness's candidate counts its lead's calls (another Harness's).

README "Candidate policies": the candidate "counts the calls and spend of its own
Harness's runs and of runs nested in them, so a cap the live run reaches through a
sub-agent under another Harness (or a sub-agent Harness's candidate, through its lead) is
judged without them". "Budgets users can see": a sub-agent under another Harness answers
to "its own caps ... its own count only its own run's calls" (Configuration table:
`max_model_calls` "its own count only its own run's calls").

`Candidate._shadow` opens the shadow of the lead's run (a run of ANOTHER Harness) in the
candidate's table, with the candidate's limits, and `_mirror` copies the live lead's
`model_calls` into it: the sub-agent's shadow run is bound by it, so the candidate counts
the lead's own model calls against the sub-agent Harness's `max_model_calls`.
"""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text, tool

from agentscope_harness import Harness, HarnessConfig

pytestmark = pytest.mark.asyncio


def _sub_config() -> HarnessConfig:
    return HarnessConfig(max_model_calls=3)


async def test_sub_agent_harness_candidate_identical_to_live_differs_nowhere() -> None:
    """Attack: the lead's Harness has no caps and no candidate; the sub-agent's Harness has
    `max_model_calls=3` and a candidate identical to it. The lead makes 3 model calls (two
    searches, then the delegation); the sub-agent then makes 2 (well under its own 3).
    The live policy sends both; the candidate counts the lead's 3 calls too and says the
    sub-agent's first call would be the fallback (`max_model_calls`): a candidate
    identical to the live policy "differs". Should: no difference."""
    lead_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    sub_h = Harness(_sub_config(), candidate=_sub_config(), load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("search", {"q": "inner"})), text("child done")]),
                       sub_h.instrument(Toolkit(tools=[tool(search)])), sub_h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                                     calls(("delegate", {"task": "t"})), text("lead done")]),
                      lead_h.instrument(Toolkit(tools=[tool(search), tool(delegate)])), lead_h.middlewares(),
                      name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    child_report = sub_h.last_report(child)
    assert child_report.terminal_state.value == "completed" and child_report.model_calls == 2, child_report
    assert child_report.candidate_differences == [], child_report.candidate_differences

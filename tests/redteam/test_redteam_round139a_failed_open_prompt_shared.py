"""Round 139 a: a prompt hook that failed open is asked again inside the same run once
any other run (a sub-agent, a concurrent run) asked it.

README "Writing a hook" (round 138, commit 5e31084): what `on_system_prompt` hooks
append "is kept for every later prompt (byte-stable), unless ... one failed open (an
observer or a transform: its text is missing) ...: then the next run asks them again"
(CHANGELOG: "asked again by the next run, not at each prompt of this one (its text kept
for the run: one error decision a run)").

Attack: an observer prompt hook whose banner service is down. The lead (round 1) calls a
sub-agent under the same Harness (its own prompt asks the hook: fine, another run);
then the lead makes its second model call.

What happened: `Harness._failed_open` holds ONE (run_id, text) pair; the sub-agent's
ask replaced the lead's, so the lead's second prompt asks the hook again: two `error`
decisions in the lead's report and the hook hit at each prompt of the lead (its text
may even change mid-run). The same happens with two concurrent runs of one Harness.
Should: one ask (one error decision) per run. Fix: keep the failed-open text per run
(e.g. on the RunState / a WeakKeyDictionary keyed by the run), not in one slot.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

ASKED: list[str] = []


@harness_hook("on_system_prompt", name="broken_banner")
def broken_banner(ctx: HookContext) -> None:
    ASKED.append("asked")
    raise RuntimeError("the banner service is down")


def _errors(report) -> list[tuple[str, str]]:
    return [(d.hook, d.action) for d in report.decisions if d.hook == "broken_banner"]


async def test_a_sub_agent_makes_its_lead_ask_the_failed_hook_again() -> None:
    ASKED.clear()
    h = Harness(HarnessConfig(), load_entry_points=False, environ={}, hooks=[broken_banner])
    child = make_agent(ScriptedModel([text("A-1 is paid.")]), h.instrument(Toolkit(tools=[])), h.middlewares(),
                       name="researcher")

    async def ask_researcher(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead_model = ScriptedModel([calls(("ask_researcher", {"task": "is A-1 paid"})), text("A-1 is paid."),])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(ask_researcher)])), h.middlewares())
    await run(lead, "is A-1 paid?")
    report = h.last_report(lead)
    assert len(lead_model.calls) == 2
    assert _errors(report) == [("broken_banner", "error")], (_errors(report), ASKED)


async def test_two_concurrent_runs_ask_the_failed_hook_at_each_prompt() -> None:
    ASKED.clear()
    h = Harness(HarnessConfig(), load_entry_points=False, environ={}, hooks=[broken_banner])

    async def lookup(q: str) -> str:
        """Look something up.

        Args:
            q (str): What.
        """
        await asyncio.sleep(0.05)
        return f"found {q}"

    agents = [make_agent(ScriptedModel([calls(("lookup", {"q": "a"})), calls(("lookup", {"q": "b"})), text("done")]),
                         h.instrument(Toolkit(tools=[tool(lookup)])), h.middlewares(), name=f"a{i}")
              for i in range(2)]
    await asyncio.gather(*(run(a) for a in agents))
    for a in agents:
        assert _errors(h.last_report(a)) == [("broken_banner", "error")], (_errors(h.last_report(a)), len(ASKED))

"""Red team, round 89 (on round 88). A harnessed sub-agent run from a lead's tool. A middleware of the sub-agent
(placed first, as the README says) makes a model call of its own outside the
sub-agent's run: after the reply ended (a grader) or before the next reply
started. ``_replying`` finds the sub-agent's ``Agent._reply`` frame and returns
its SETTLED run (``table.current``), so ``_live_guard`` gives up: it neither
walks on to the lead's frame nor falls back to ``current_run()`` (the lead's
live run, bound while its tool runs). The $10 call escapes the lead's $1 cap.
The same call from a sub-agent WITHOUT a harness is charged to the lead."""

from typing import Any

from agentscope.event import ReplyEndEvent
from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit
from pydantic import BaseModel
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState

PRICES = {"grader": (10.0, 10.0), "sub": (1.0, 1.0), "lead": (1.0, 1.0)}


class Grade(BaseModel):
    ok: bool


class Grader(MiddlewareBase):
    """Grades each reply once it ended (a model call of its own)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    async def on_reply(self, agent, input_kwargs, next_handler):
        async for item in next_handler(**input_kwargs):
            yield item
            if isinstance(item, ReplyEndEvent):
                await self.model.generate_structured_output([UserMsg("user", "grade it")], structured_model=Grade)


def _lead(sub_harnessed: bool):
    grader = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=1_000_000, out=0)],
                           model="grader")
    sub_model = ScriptedModel([text("the sub-agent's answer")], model="sub")
    mws: list[Any] = [Grader(grader)]
    if sub_harnessed:
        sub_h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False, environ={})
        mws += sub_h.middlewares()
    sub = make_agent(sub_model, [], mws, name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        msg = await sub.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    lead_h = Harness(HarnessConfig(deadline_s=30, cost=CostPolicy(cap_usd=1.0, prices=PRICES)),
                     load_entry_points=False, environ={})
    lead_model = ScriptedModel([calls(("delegate", {"task": "find it"})), text("Done.")], model="lead")
    lead = make_agent(lead_model, lead_h.instrument(Toolkit(tools=[tool(delegate)])), lead_h.middlewares(),
                      name="lead")
    return lead_h, lead, grader


async def test_control_bare_subagent_graders_call_is_the_leads() -> None:
    lead_h, lead, grader = _lead(sub_harnessed=False)
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    report = lead_h.last_report(lead)
    assert len(grader.calls) == 1
    assert report.spent_usd >= 10.0 and report.terminal_state is TerminalState.INCOMPLETE


async def test_harnessed_subagent_graders_call_is_the_leads() -> None:
    lead_h, lead, grader = _lead(sub_harnessed=True)
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    report = lead_h.last_report(lead)
    assert len(grader.calls) == 1
    assert report.spent_usd >= 10.0, f"the $10 grader call escaped the lead's $1 cap: spent {report.spent_usd}"
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget"), (
        report.terminal_state, report.reason)

"""Round 141a: a sub-agent's completed stop tells its lead it failed, while its report
says completed.

README, Writing a hook, ctx.stop: text defaults "for a stop that completes the run or
leaves it waiting, `reason` itself (a completed run never tells the user it failed; with
`require_finish_tool`, the fallback)". A sub-agent without a finishing tool of its own
does not owe one ("it answers its lead", outcome.owes_finish): its completed stop ends
COMPLETED.

Attack: config with a finishing tool (publish_report), a writer sub-agent whose toolkit
has none. A pre_think hook in the writer ctx.stop("EU sales grew 12%", COMPLETED).
HookContext.stop reads `self.config.finish_required()` (config-wide), not
`finish_required(run, config)`, so the writer answers the fallback with
finish_tool_not_called's words ("I could not complete this request ...") although its
report is completed/"EU sales grew 12%". Should: the writer answers its reason.
"""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookContext, TerminalState, ToolPolicy, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio


@harness_hook("pre_think", priority=70, name="writer_done", kind="observer")
def writer_done(ctx: HookContext) -> None:
    if ctx.run.parent is not None:
        ctx.stop("EU sales grew 12%", TerminalState.COMPLETED)


async def lookup(region: str) -> str:
    """Look up.

    Args:
        region (str): The region.
    """
    return "ok"


async def test_sub_agent_completed_stop_answers_its_reason() -> None:
    h = Harness(HarnessConfig(tools={"publish_report": ToolPolicy(role="finish"),
                                     "lookup": ToolPolicy(role="lookup")}),
                hooks=[writer_done], load_entry_points=False, environ={})
    writer = make_agent(ScriptedModel([text("never")]), h.instrument(Toolkit(tools=[tool(lookup)])),
                        h.middlewares(), name="writer")
    got: list[str] = []

    async def publish_report(region: str) -> str:
        """Have the writer draft the report, and deliver it.

        Args:
            region (str): The region.
        """
        said = (await writer.reply(UserMsg("lead", f"report on {region}"))).get_text_content() or ""
        got.append(said)
        return said

    lead = make_agent(ScriptedModel([calls(("publish_report", {"region": "EU"}))]),
                      h.instrument(Toolkit(tools=[tool(publish_report)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "EU report")
    report = h.last_report(lead)
    children = [(c.agent, c.terminal_state.value, c.reason) for c in report.children]
    assert got == ["EU sales grew 12%"], (got, children, report.terminal_state.value, report.reason)

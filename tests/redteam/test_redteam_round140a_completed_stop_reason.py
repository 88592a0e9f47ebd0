"""Borderline finding (round 140a). README, Writing a hook: ctx.stop "... else, for a stop that
completes the run or leaves it waiting, `reason` itself (a completed run never tells the user it
failed; with `require_finish_tool`, the fallback)"; `completed` with require_finish_tool "is reported
`incomplete`, `finish_tool_not_called`"; fallback_text's `{reason}`: "plain words for the library's
reasons, a hook's own reason as the hook wrote it".

Attack: a pre_think hook ctx.stop("all done here", COMPLETED) in a run with a finishing tool.
What happened: the report says incomplete/finish_tool_not_called, but the user is told
"I could not complete this request (all done here). ..." - a failure sentence whose reason is the
hook's completion words, contradicting both itself and the report. Expected: the fallback filled
with the reason the run ended with (finish_tool_not_called's plain words)."""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from scripted import make_agent

from agentscope_harness import Harness, HarnessConfig, HookContext, Principal, TerminalState, ToolPolicy, harness_hook
from agentscope_harness.testing import ScriptedModel, text

pytestmark = pytest.mark.asyncio


async def submit_answer(answer: str) -> str:
    """Submit.

    Args:
        answer (str): The answer.
    """
    return "ok"


@harness_hook("pre_think", priority=70, name="done_already", kind="observer")
def done_already(ctx: HookContext) -> None:
    ctx.stop("all done here", TerminalState.COMPLETED)


async def test_completed_stop_in_finish_run_tells_the_reason_the_report_gives() -> None:
    cfg = HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")})
    h = Harness(cfg, hooks=[done_already], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([text("never")]), [submit_answer], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(Principal(user_id="u-42", tenant="acme")):
        final = await agent.reply(UserMsg("user", "help"))
    rep = h.last_report(agent)
    assert (rep.terminal_state, rep.reason) == (TerminalState.INCOMPLETE, "finish_tool_not_called")
    said = final.get_text_content() or ""
    assert said.startswith(cfg.fallback_text.format(
        reason="it did not deliver its result the way this task requires")), said

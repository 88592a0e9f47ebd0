"""Red team, round 100. Two Harnesses, each on its own store with a run
concurrency limit (``scope="principal", max_in_flight=1``). A lead under
``ha`` starts a migrator under ``hb`` in the background and settles; the
migrator parks on its client (the lead's kept slot goes back). The client
answers outside any run: the migrator resumes nested in its settled lead.
``hb``'s ``Fleet.open_run`` sees ``root_here`` False (the root is ``ha``'s)
and takes nothing; ``ha``'s fleet is never told. The lead's slot is held by
nobody while its sub-agent's work runs, so a second run of the principal
under ``ha`` is admitted beside it (README: "one opened or resumed under a
lead no longer in flight takes the lead's slot again")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import ToolResultBlock
from agentscope.tool import Toolkit
from background_kit import assert_second_run_refused, spawner, while_resumed
from scripted import ALICE, ScriptedModel, calls, client_tool, make_agent, run, slow, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


def limited() -> Harness:
    config = HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)])
    return Harness(config, load_entry_points=False, environ={})


@pytest.mark.xfail(strict=True, reason=(
    "stated limit (README, Running many workers): a sub-agent under another Harness opened or resumed under a lead no longer in flight takes none of the lead's Harness's slots"
))
async def test_a_sub_agent_under_another_harness_resumed_under_a_settled_lead_holds_its_slot() -> None:
    ha, hb = limited(), limited()
    child = make_agent(
        ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("slow", {"seconds": 0.6})),
                       text("migrated")]),
        hb.instrument(Toolkit(tools=[client_tool(), tool(slow)])), hb.middlewares(), name="migrator",
    )
    asked: list[Any] = []
    background: list[asyncio.Task[Any]] = []
    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]),
                      [spawner(child, background, asked)], ha.middlewares(), name="lead")
    with ha.acting_for(ALICE):
        await run(lead, "migrate my data")
        await asyncio.gather(*background)
        assert hb.last_report(child).terminal_state is TerminalState.WAITING_INPUT
        assert isinstance(asked[0], RequireExternalExecutionEvent)
        call = asked[0].tool_calls[0]
        done = [ToolResultBlock(id=call.id, name=call.name, output="code ok", state="success")]
        answer = ExternalExecutionResultEvent(reply_id=child.state.reply_id, execution_results=done)
        await while_resumed(child, answer, lambda: assert_second_run_refused(
            ha, "the lead's slot was not taken again for its resumed sub-agent"))
    assert hb.last_report(child).terminal_state is TerminalState.COMPLETED

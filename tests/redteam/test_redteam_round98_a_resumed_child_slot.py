"""Red team, round 98 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1)``. A lead's tool starts a sub-agent in a background task
and the lead settles; the sub-agent parks on its client (a client-executed
tool), which gives back the run slot the lead kept for it (``after_nested``:
a run waiting for a human is not in flight), as README says a parked run
does ("it takes them again on resume"). The client answers, the sub-agent
resumes (nested in its settled lead again: ``nest_on_resume``) and goes on
with a slow tool; but ``Fleet.open_run`` takes slots for a root run only,
and the lead's kept slot is gone, so nothing holds one: a second run of the
principal is admitted and completes beside the resumed sub-agent, two runs'
work in flight under a limit of one."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.event import ExternalExecutionResultEvent
from agentscope.message import ToolResultBlock
from agentscope.tool import Toolkit
from background_kit import spawner
from scripted import ALICE, RAN, ScriptedModel, calls, client_tool, drain, make_agent, run, search, slow, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_resumed_sub_agent_of_a_settled_lead_holds_its_principals_run_slot() -> None:
    h = Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                load_entry_points=False, environ={})
    child_model = ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("slow", {"seconds": 0.6})),
                                 text("migrated")])
    child = make_agent(child_model, h.instrument(Toolkit(tools=[client_tool(), tool(slow)])), h.middlewares(),
                       name="migrator")
    asked: list[Any] = []
    background: list[asyncio.Task[Any]] = []

    spawn = spawner(child, background, asked)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]), [spawn],
                      h.middlewares(), name="lead")
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h.middlewares(), name="other")
    with h.acting_for(ALICE):
        await run(lead, "migrate my data")
        await asyncio.gather(*background)
        assert h.last_report(child).terminal_state is TerminalState.WAITING_INPUT
        call = asked[0].tool_calls[0]
        done = [ToolResultBlock(id=call.id, name=call.name, output="code ok", state="success")]
        resumed = asyncio.create_task(drain(child, ExternalExecutionResultEvent(
            reply_id=child.state.reply_id, execution_results=done)))
        try:
            while "slow:start" not in RAN:
                await asyncio.sleep(0.01)
            await run(other, "find my invoices")
        finally:
            await resumed
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED
    report = h.last_report(other)
    assert report.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, (
        f"a second run of the principal ran beside a resumed sub-agent: {report.terminal_state.value}, {RAN}"
    )

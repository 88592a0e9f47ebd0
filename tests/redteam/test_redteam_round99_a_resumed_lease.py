"""Red team, round 99 (a). ``ConcurrencyLimit(scope="principal",
max_in_flight=1, lease_s=0.2)``. A lead's tool starts a sub-agent in the
background and the lead settles; the sub-agent parks on its client. The
client answers outside any run: the sub-agent resumes nested in its
settled lead (``nest_on_resume`` keeps the settled parent, but never puts
it back in its root's ``live_nested``: only ``_nest`` does). ``open_run``
takes the lead's slot again for it, but ``_Holds.renewable`` renews a
settled root's slots only while ``live_nested`` is non-empty: it is
empty, so the re-taken lease is never renewed and lapses after
``lease_s`` while the sub-agent still runs a slow tool. A second run of
the principal is then admitted beside it: two runs' work in flight under a
limit of one (README: a slot is "renewed while its run lasts")."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.event import ExternalExecutionResultEvent
from agentscope.message import ToolResultBlock
from agentscope.tool import Toolkit
from background_kit import spawner
from scripted import ALICE, RAN, ScriptedModel, calls, client_tool, drain, make_agent, run, search, slow, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def test_a_resumed_sub_agents_retaken_slot_is_renewed_while_it_runs() -> None:
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=0.2)
    h = Harness(HarnessConfig(concurrency_limits=[limit]), load_entry_points=False, environ={})
    child_model = ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("slow", {"seconds": 1.0})),
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
            await asyncio.sleep(0.5)  # well past lease_s: a renewed lease is still held
            await run(other, "find my invoices")
        finally:
            await resumed
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED
    report = h.last_report(other)
    assert report.terminal_state is not TerminalState.COMPLETED and "invoices" not in RAN, (
        f"the resumed sub-agent's slot lapsed unrenewed; a second run ran beside it: {report.terminal_state.value}"
    )

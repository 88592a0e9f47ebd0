"""Round 147 a (arguable scope, see the report): under AgentScope's DONT_ASK permission
mode (an unattended run: AgentScope's scheduled tasks default to it), a spent run
budget whose policy asks (`CostPolicy(on_exhausted="ask")`) still ends the reply
`waiting_input` with "Shall I continue? Continuing needs your approval of a larger
budget." for nobody, and the agent's state keeps the parked budget: every later
(scheduled) reply of the agent continues the spent budget and asks again, forever.
The harness's other questions (a policy's `ask_when`, a hook's `ctx.ask`, a ledger's
`on_exhausted="ask"`) are refused there (`tool_adapter._nobody_to_ask`): those held.

README "Ask a human": "An agent whose permission engine runs in AgentScope's `DONT_ASK`
mode (unattended: nobody answers; AgentScope denies its own asks there) has such a call
refused instead (`permission_denied` ...), never parked for nobody." and "Until a human
answers, every reply of that agent continues the spent budget and asks again".

Attack: a $0.25 cap that asks, each model call $0.10, the agent in DONT_ASK.
Seen: `waiting_input` ("the budget of this task ($0.2500) is used up; approve an
extension to continue"). Should: where nobody can be asked, the budget ends the run as
`on_exhausted="stop"` does (`incomplete`, `budget`, the fallback answer), parking nothing.
Control: `ctx.ask` and a ledger's ask under DONT_ASK are refused, not parked.
"""
from __future__ import annotations

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.permission import PermissionMode

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Ledger, ModelPrice, TerminalState, ToolPolicy
from agentscope_harness import harness_hook as hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio

PRICE = {"scripted": ModelPrice(input_per_mtok=100.0, output_per_mtok=0.0)}  # 1000 tokens: $0.10


async def test_a_budget_that_asks_parks_nobody_in_dont_ask_mode() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.25, on_exhausted="ask", prices=PRICE)),
                load_entry_points=False, environ={})
    model = ScriptedModel(lambda _: calls(("search", {"q": f"mugs {len(model.calls)}"}), inp=1000, out=0))
    agent = make_agent(model, [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        await run(agent, "research mugs")
    report = h.last_report(agent)
    assert report.terminal_state is not TerminalState.WAITING_INPUT, (
        f"parked for nobody: {report.terminal_state.value} ({report.reason})")


async def test_control_ctx_ask_is_refused_in_dont_ask_mode() -> None:
    @hook("pre_tool_call", name="confirm_searches", priority=50)
    def confirm(ctx):  # type: ignore[no-untyped-def]
        if ctx.tool.name == "search":
            ctx.ask("searches need a human")

    h = Harness(HarnessConfig(), hooks=[confirm], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        events, _ = await run(agent, "go")
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED


async def test_control_a_ledgers_ask_is_refused_in_dont_ask_mode() -> None:
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                              ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=1)}),
                load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")]),
                       [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        events, _ = await run(agent, "go")
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED

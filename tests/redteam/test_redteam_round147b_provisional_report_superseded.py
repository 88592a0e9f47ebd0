"""Round 147 b: a resumed HITL run does not supersede its provisional report in `harness.reports`.

README "Choices where the design is silent": "A parked human-in-the-loop reply gets a
provisional report (`waiting_input`); its resumption continues the same run and supersedes
it". README "Combining with AgentScope's built-in middlewares" says what superseding a
provisional report means: "the reply's true end settles the one that supersedes it (same
`run_id`; `on_report` is called again, `reports` and `last_report` keep the last)".

Attack: a refund parks on a human (`ask_when`); the same caller approves it; the resumed
reply completes. Then read `harness.reports`, the bounded history a dashboard sums.

What happens: the history holds both reports of the one run (same `run_id`): the
`waiting_input` one and the `completed` one; the run's model calls are counted twice over
the history (the resumed report already includes the calls made before the park), and a
resumed run that is then abandoned leaves `waiting_input` and `cancelled`/`abandoned` side by
side. Should: the resumed run's report replaces the provisional one in `harness.reports`, as
`ReplyLifecycle._went_on` does for a swallowed end (`self.harness.reports.remove(stale)`),
e.g. where the lifecycle publishes the report of a run that resumed a park."""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.testing import ScriptedModel, calls, text
from tests.scripted import ALICE, ALLOW, confirm, drain, make_agent, run, until_question

pytestmark = pytest.mark.asyncio

RAN: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(order_id)
    return f"refunded {order_id}"


def _shop() -> tuple[Harness, ScriptedModel, object]:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", ask_when=lambda a: "refunds need a human")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("Refunded A-1."), text("Anything else?")],
                          stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(refund, permission=ALLOW)])), h.middlewares())
    return h, model, agent


async def test_resumed_run_replaces_its_provisional_report_in_history() -> None:
    RAN.clear()
    h, model, agent = _shop()
    with h.acting_for(ALICE):
        ask = await until_question(agent, UserMsg("user", "refund A-1"), kind=RequireUserConfirmEvent)
        await asyncio.sleep(0.1)  # the closed stream's run is settled in a task (README)
        parked = h.last_report(agent)
        assert parked is not None and parked.terminal_state is TerminalState.WAITING_INPUT
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    assert RAN == ["A-1"]
    final = h.last_report(agent)
    assert (final.run_id, final.terminal_state) == (parked.run_id, TerminalState.COMPLETED)
    same_run = [(r.terminal_state.value, r.reason, r.model_calls) for r in h.reports if r.run_id == parked.run_id]
    assert same_run == [("completed", "answered", final.model_calls)], (
        f"harness.reports keeps {same_run} for one run; {len(model.calls)} model calls were made, "
        f"the history sums {sum(r.model_calls for r in h.reports)}")


async def test_abandoned_resumed_run_replaces_its_provisional_report() -> None:
    RAN.clear()
    h, model, agent = _shop()
    with h.acting_for(ALICE):
        ask = await until_question(agent, UserMsg("user", "refund A-1"), kind=RequireUserConfirmEvent)
        await asyncio.sleep(0.1)
        parked = h.last_report(agent)
        stream = agent.reply_stream(confirm(ask, ask.tool_calls[0]), yield_final_msg=True)
        async for _ in stream:
            if RAN:
                break  # stop reading the resumed reply, never close it
        await run(agent, "thanks")  # the next reply settles the abandoned resumed run
        await stream.aclose()
    same_run = [(r.terminal_state.value, r.reason) for r in h.reports if r.run_id == parked.run_id]
    assert same_run == [("cancelled", "abandoned")], same_run

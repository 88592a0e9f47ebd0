"""Round 108 (b): with the tool adapter alone, the duplicate gate refuses
nothing any more (a regression of round 107).

Round 107 changed ``repeat_call_gate`` to refuse an identical successful call
only "while the earlier result is in ``run.results.live``" (the context the
model read). That account is filled by the agent adapter's ``pre_think``
(``_results_in_context``); the tool adapter alone has no ``pre_think``, so it
is always empty and every repeat runs. Before round 107 (``not in
results.pruned``) the repeat was refused, as it is with both adapters.

Here a refund tool is called twice with the same arguments in two rounds: with
both adapters the second is refused ``duplicate_call``; with the tool adapter
alone the refund is issued twice, although the first result is in the context
(nothing prunes: the pruner is ``pre_think``'s too).

README: "Either adapter works alone ... The tool adapter alone still gates
every tool call"; hook table #11 ``repeat_call_gate`` (pre_tool_call, a tool
gate): "Identical call ... that already succeeded, its result still in the
context the model read (a result pruned, or compressed into AgentScope's
summary, may be fetched again) ...: ``duplicate_call``".
"""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, last_tool_message, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

ISSUED: list[str] = []


async def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
        amount (int): USD.
    """
    ISSUED.append(f"{order_id}:{amount}")
    return f"refund of ${amount} on {order_id} issued"


async def _refunds(adapters: slice) -> tuple[list[str], str]:
    ISSUED.clear()
    h = Harness(HarnessConfig(tools={"issue_refund": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("issue_refund", {"order_id": "A-1", "amount": 40})),
                           calls(("issue_refund", {"order_id": "A-1", "amount": 40})),
                           text("Refunded $40.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(issue_refund)])), h.middlewares()[adapters])
    with h.acting_for(ALICE):
        await run(agent, "refund my order A-1 ($40)")
    return list(ISSUED), last_tool_message(model)


async def test_the_tool_adapter_alone_refuses_a_repeated_refund_as_both_adapters_do() -> None:
    issued, told = await _refunds(slice(None))  # both adapters: the control
    assert issued == ["A-1:40"] and told.startswith("[harness:duplicate_call]"), (issued, told)
    issued, told = await _refunds(slice(1, 2))  # the tool adapter alone (README: "works alone")
    # the break: the second, identical refund runs
    assert issued == ["A-1:40"], (issued, told[:120])
    assert told.startswith("[harness:duplicate_call]"), told[:120]

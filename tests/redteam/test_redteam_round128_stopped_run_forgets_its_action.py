"""Round 128 d (tell the user the truth): a stopped run tells its user it
"could not complete" the request and hands over "what it found", leaving out
the cancel it actually made.

README "Tells the truth": "a stopped run hands over what it found"; "What the
caller receives": a stop (`max_model_calls`, `deadline`, `budget`, `stalled`, ...)
-> "`fallback_text` ... plus a short, redacted list of what the run found".
The brief's promise: none of what the user receives claims failure where an
action completed.

Attack: the model cancels order A-1 (a `mutation`, it succeeds), then goes on
looking up items (6 lookups) until `max_model_calls` stops the run.

What happened: `run.findings` is a `deque(maxlen=FINDINGS_KEPT=5)` filled in
call order (`CallFlow.shape`), so the cancel is pushed out by later lookups. The
user receives "I could not complete this request (it took too many steps).
Please try again ..." and a list of five stock lookups: nothing says A-1 was
cancelled. The report shows `cancel_order: 1`. A user who "tries again" cancels
(refunds, charges) twice.

Should: a state-changing call that succeeded (role `mutation`) is never pushed
out of what a stopped run hands over (keep mutations apart from lookups in
`run.findings`, or list them first), so the fallback names every action taken.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, tool

pytestmark = pytest.mark.asyncio

CANCELLED: list[str] = []


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    CANCELLED.append(order_id)
    return f"order {order_id} cancelled, refund of $50 on its way"


async def lookup(item: str) -> str:
    """Look up an item's stock.

    Args:
        item (str): The item.
    """
    return f"item {item}: in stock, 3 left, colour {item}-blue"


async def test_a_stopped_run_tells_the_user_about_the_cancel_it_made() -> None:
    CANCELLED.clear()
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation"), "lookup": ToolPolicy(role="lookup")},
                              max_model_calls=7), load_entry_points=False, environ={})
    script = [calls(("cancel_order", {"order_id": "A-1"}))] + [calls(("lookup", {"item": f"mug{i}"})) for i in range(10)]
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(cancel_order), tool(lookup)])),
                       middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "cancel A-1, then find me a mug")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert CANCELLED == ["A-1"] and report.tool_calls["cancel_order"] == 1  # the cancel ran
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert "could not complete" in received  # the user is told the request failed ...
    # ... and must be told what was done before it stopped: A-1 is cancelled
    assert "cancel_order" in received and "A-1" in received, received

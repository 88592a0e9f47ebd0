"""Red team, round 96 (b). A web worker that rebuilds its agent per request
(one Harness per process, the agent's state loaded from storage) parks
Alice's reply on a payout's confirmation; her "yes" reaches the same worker
and a new Agent object resumes the run (``ReplyLifecycle.resume`` finds it
in the table and takes its run slot again: ``Fleet.open_run``). While that
resume runs, the first request's Agent object is collected: its parked
holder (``RunTable.park``, a ``weakref.finalize``) drops the run from the
table. The resumed run is then never settled nor freed (``close`` finds its
slot gone): no report for the resume, and the run slot it took at the
resume is kept (renewed while the run object lives, then for ``lease_s``):
Alice's next reply is refused ``concurrency_limited`` although nothing of
hers is in flight. README ("Running many workers"): "A resumed run takes a
slot again, on whichever worker the answer reaches"; a run's slots go back
when it closes; "Choices": every run is settled."""

from __future__ import annotations

import gc
from typing import Any

from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, ToolPolicy

REQUESTS: list[Any] = []
"""The first request's agent, until the web framework lets go of it."""
PAID: list[int] = []


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    REQUESTS.clear()  # the first request's handler finished meanwhile: its agent is collected
    gc.collect()
    PAID.append(amount)
    return f"paid {amount}"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    return f"found {q}"


async def test_a_resume_on_a_rebuilt_agent_is_settled_and_frees_its_slot() -> None:
    h = Harness(HarnessConfig(
        tools={"pay_out": ToolPolicy(role="mutation", ask_when=lambda args: "over 50" if args["amount"] > 50 else None)},
        concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=300)],
    ), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid 80.")])

    def toolkit() -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(pay_out), tool(lookup)]))

    first = make_agent(model, toolkit(), h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(first, UserMsg("user", "pay me 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    saved = first.state.model_dump_json()
    REQUESTS.append(first)
    del first, items

    second = make_agent(model, toolkit(), h.middlewares(), state=AgentState.model_validate_json(saved))
    with h.acting_for(ALICE):
        await drain(second, confirm(asked, asked.tool_calls[0]))
    assert PAID == [80]
    resumed = h.last_report(second)
    assert resumed is not None and (resumed.terminal_state.value, resumed.reason) == ("completed", "answered"), (
        resumed and (resumed.terminal_state.value, resumed.reason))

    fresh = make_agent(ScriptedModel([calls(("lookup", {"q": "order"})), text("Found it.")]), toolkit(),
                       h.middlewares(), name="fresh")
    with h.acting_for(ALICE):
        await drain(fresh, UserMsg("user", "find my order"))
    again = h.last_report(fresh)
    assert (again.terminal_state.value, again.reason) == ("completed", "answered"), (again.terminal_state, again.reason)

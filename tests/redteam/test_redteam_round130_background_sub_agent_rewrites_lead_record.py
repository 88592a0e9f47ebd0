"""Round 130 a. A background sub-agent's late admission on the worker that parked its
lead rewrites the lead's park record over the newer one another worker wrote: the
user's answer to the park that waits, on a third worker, is refused ("answers another park
than the one waiting").

README "Running many workers" / "Human in the loop": a park's answer "reaching two
workers at once ... or sent again on an old copy of the state, resumes one run, and
the other acts for nobody (... an earlier park's sent again, never takes the answer of
the park that waits ...)"; "A sub-agent a tool left running in the background that
goes on after its lead parked has the lead's record written again with each model or
tool call it charges ... *limit*: what it spends after a resume elsewhere has read the
record is this process's alone" (a limit on spend, not on which park the record
says). Round 129 b fixed this for the run's own late admission (`pauses`); the
lead's record is still rewritten by `lifecycle.record_parked`, unconditionally
(`park_put` is INSERT OR REPLACE), for a nested run's admission.

Attack: three workers on one SQLite file. Worker A: the lead's turn calls `research`
(starts a sub-agent in a background task, returns at once) and the client-run
`verify_code`; the reply parks (read to its end: park 1, recorded by A). The
sub-agent's `lookup` is judged slowly on A (its order service answers in 2 s). The
client's result reaches worker B; the lead asks for a second code and parks again
(park 2, recorded by B). Then A's sub-agent's `lookup` is admitted:
`record_parked` walks up to A's lead (still parked there, `waiting_input`) and writes
park 1's record over B's. The client's second code reaches worker C.

What happens: C reads park 1's record (its park id is not the one the state
carries) and ends the reply `incomplete` (`refused:permission_denied`, decision
`resume_check`: "answers another park than the one waiting"): the user's legitimate
answer does nothing, the lead's last model call is never made. Control (the
sub-agent judged at once, before the lead's first park is answered): C completes.
Should: a lead's record is rewritten only while its park is unclaimed (a write
conditional on the park id in the store), never over a later park's.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, TerminalState, ToolPolicy
from tests.redteam.park_kit import checked, instrumented, resumed
from tests.redteam.park_kit import worker as park_worker
from tests.scripted import ALICE, ScriptedModel, calls, client_result, make_agent, text, tool

pytestmark = pytest.mark.asyncio

BACKGROUND: list[asyncio.Task] = []
LOOKED: list[str] = []


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    LOOKED.append(order_id)
    return f"order {order_id}: paid, not shipped"


def worker(path: str) -> Harness:
    return park_worker(path, tools={"lookup": ToolPolicy(role="lookup")})


def lead_toolkit(h: Harness, child_delay: float | None = None) -> Toolkit:
    async def research(topic: str) -> str:
        """Start a researcher on a topic in the background.

        Args:
            topic (str): The topic.
        """
        if child_delay is not None:  # only the first worker's lead starts one
            # the order service is asked whether the caller may see it
            child = make_agent(ScriptedModel([calls(("lookup", {"order_id": "A-1"})), text("A-1 is paid.")]),
                               h.instrument(Toolkit(tools=[checked(lookup, child_delay)])), h.middlewares(),
                               name="researcher")
            BACKGROUND.append(asyncio.create_task(child.reply(UserMsg("lead", topic))))
        return "the researcher started"

    return instrumented(h, tool(research))


async def _until_asked(agent, inputs) -> RequireExternalExecutionEvent | None:
    asked = None
    async for item in agent.reply_stream(inputs, yield_final_msg=True):  # read to its end: parked
        if isinstance(item, RequireExternalExecutionEvent):
            asked = item
    return asked


@pytest.mark.parametrize("judged_for", [0.0, 2.0], ids=["control-judged-at-once", "judged-past-the-next-park"])
async def test_a_background_sub_agent_does_not_undo_the_leads_later_park(tmp_path: Path, judged_for: float) -> None:
    BACKGROUND.clear()
    LOOKED.clear()
    path = str(tmp_path / "fleet.db")
    model = ScriptedModel([calls(("research", {"topic": "order A-1"}), ("verify_code", {"code": "123"})),
                           calls(("verify_code", {"code": "456"})),
                           text("Both codes check out; order A-1 is paid."), text("x")])
    a = worker(path)
    first = make_agent(model, lead_toolkit(a, child_delay=judged_for), a.middlewares())
    with a.acting_for(ALICE):
        asked = await _until_asked(first, UserMsg("user", "check my order A-1"))
    assert asked is not None
    if not judged_for:
        await asyncio.sleep(0.3)  # control: the sub-agent is done before the answer moves on
    saved = first.state.model_dump_json()

    b = worker(path)
    second = resumed(model, b, lead_toolkit(b), saved)
    with b.acting_for(ALICE):
        asked_again = await _until_asked(second, client_result(asked, "code 123 ok"))
    assert asked_again is not None  # park 2, recorded by B
    saved_again = second.state.model_dump_json()
    await asyncio.wait(BACKGROUND, timeout=6.0)  # 3x A's judging: the sub-agent's lookup was admitted
    assert LOOKED == ["A-1"]

    c = worker(path)
    third = resumed(model, c, lead_toolkit(c), saved_again)
    with c.acting_for(ALICE):
        async for _ in third.reply_stream(client_result(asked_again, "code 456 ok")):
            pass
    report = c.last_report(third)
    assert report.terminal_state is TerminalState.COMPLETED and len(model.calls) == 3, (
        f"the client's answer to park 2 on a third worker: {report.terminal_state.value} ({report.reason}), "
        f"{len(model.calls)} lead model calls; {[(d.hook, d.detail) for d in report.decisions][:6]}")

"""Red team on round 175 a: the lead's deadline and `clamp_timeout` / `remaining_time`
inside an `acting_for(<another caller>)` block a tool of the lead awaits."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, LOG, POLICIES, SEEN, ask_lead, fresh, notes
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import (
    Harness,
    HarnessConfig,
    TerminalState,
    clamp_timeout,
    remaining_time,
)


async def test_an_awaited_reply_for_bob_ends_with_its_own_answer_at_alices_deadline():
    """README "Nested runs": a reply a tool runs under `acting_for(<another caller>)` is a
    task of its own, "timed by the run's deadline while that run is live (the tool awaiting
    it is cut at it; the reply ends first, with its own answer)". Alice's lead has
    `deadline_s=0.5`; its tool awaits Bob's job on a worker (another Harness, `deadline_s=30`),
    2 notes of 0.4 s each. With round 175 a's first fix, Alice's cut of her tool cancelled
    Bob's job in its second call (`cancelled`, `interrupted`, a call in flight). Should: Bob's
    job ends `incomplete` (`deadline`) before Alice's cut, having read 1 note."""
    fresh(0.4)
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, deadline_s=30), load_entry_points=False, environ={})
    worker = make_agent(ScriptedModel([calls(("notes", {"q": "bob-1"})), calls(("notes", {"q": "bob-2"})),
                                       text("bob's answer")]),
                        hw.instrument(Toolkit(tools=[tool(notes)])), hw.middlewares(), name="worker")

    async def ask(q: str) -> str:
        with hw.acting_for(BOB):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.sleep(0.5)
    wr = hw.last_report(worker)
    lr = h.last_report(lead)
    detail = (LOG, SEEN, wr.terminal_state if wr else None, wr.reason if wr else None, lr.terminal_state, lr.reason)
    assert wr is not None and (wr.terminal_state, wr.reason) == (TerminalState.INCOMPLETE, "deadline"), detail
    assert LOG == [("notes", "bob-1")], detail
    assert SEEN[0][1] is not None and SEEN[0][1] < 0.5, detail  # Bob's tools read the deadline that binds


async def test_clamp_timeout_inside_the_block_still_sees_the_deadline_that_cuts_the_tool():
    """DESIGN 6.1: `clamp_timeout(t)` returns `min(t, remaining)`. Inside the lead's tool,
    in a `with acting_for(BOB)` block (before the worker's reply opens), the tool is still
    the lead's call, cut at the lead's deadline (`_within_deadline`). Alice's deadline is
    5 s; `clamp_timeout(30)` there should be <= 5 (and `remaining_time()` not `None`)."""
    got: list = []
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=5), load_entry_points=False, environ={})

    async def ask(q: str) -> str:
        got.append(("before", remaining_time(), clamp_timeout(30)))
        with h.acting_for(BOB):
            got.append(("inside", remaining_time(), clamp_timeout(30)))
        return "ok"

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    assert got[0][1] is not None and got[0][2] <= 5, got
    assert got[1][1] is not None and got[1][2] <= 5, got

"""Red team 175 b: deadlines around `acting_for(<another caller>)` blocks."""
from __future__ import annotations

import asyncio

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, LOG, POLICIES, ask_lead, fresh, notes
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy


@pytest.mark.xfail(strict=True, reason="README limit: a reply opened in a block while the run is live takes "
                   "its deadline, kept after the run settles")
async def test_bobs_job_opened_while_alice_live_is_not_cut_at_alices_deadline_after_she_settled():
    """README: Bob's reply is "timed by the run's deadline while that run is live ...". Alice's
    lead (`deadline_s=0.5`) starts a background task serving Bob (`acting_for(BOB)` entered at
    once, while Alice is live) and completes at once. Bob's job (worker Harness `deadline_s=30`)
    reads 2 notes of 0.4 s each: 0.8 s, past Alice's deadline, but Alice's run settled at ~0 s.
    Should: Bob's job completes (Alice no longer live). Broken if it ends `incomplete`,
    `deadline` at Alice's 0.5 s: Alice's settled run times another caller's job."""
    fresh(0.4)
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, deadline_s=30), load_entry_points=False, environ={})
    worker = make_agent(ScriptedModel([calls(("notes", {"q": "bob-1"})), calls(("notes", {"q": "bob-2"})),
                                       text("bob's answer")]),
                        hw.instrument(Toolkit(tools=[tool(notes)])), hw.middlewares(), name="worker")
    jobs: list = []

    async def serve_bob():
        with hw.acting_for(BOB):
            return await worker.reply(UserMsg("bob", "my notes"))

    async def start(why: str) -> str:
        """Start the shared worker.

        Args:
            why (str): Why.
        """
        jobs.append(asyncio.create_task(serve_bob()))
        await asyncio.sleep(0)  # the job opens while Alice's run is live
        return "started"

    lead = make_agent(ScriptedModel([calls(("start", {"why": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(start)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr = h.last_report(lead)
    assert lr.terminal_state == TerminalState.COMPLETED, (lr.terminal_state, lr.reason)
    await asyncio.gather(*jobs)
    wr = hw.last_report(worker)
    detail = (LOG, wr.terminal_state, wr.reason)
    assert wr.terminal_state == TerminalState.COMPLETED, detail
    assert LOG == [("notes", "bob-1"), ("notes", "bob-2")], detail


async def test_alices_helper_reentered_inside_bobs_tighter_timed_worker_ends_with_its_own_answer():
    """A -> B -> A. Alice's lead (`deadline_s=30`) awaits Bob's worker (worker Harness
    `deadline_s=0.5`); Bob's worker's tool hands a piece back to a helper for Alice
    (`acting_for(ALICE)`: Alice's run's work once more, nested in her lead). The helper runs
    inside Bob's tool, which Bob's run cuts at Bob's 0.5 s. DESIGN 6.1: a run called from inside
    a tool of a harnessed run "inherits the tighter deadline"; README: "the reply ends first, with
    its own answer". Should: the helper ends `incomplete` (`deadline`) after 1 note, not
    `cancelled` by Bob's cut of the tool running it."""
    fresh(0.4)
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=30), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    helper = make_agent(ScriptedModel([calls(("notes", {"q": "a-1"})), calls(("notes", {"q": "a-2"})),
                                       text("helper's answer")]),
                        h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="helper")

    async def help_owner(q: str) -> str:
        """Hand a piece back to the job's owner.

        Args:
            q (str): What.
        """
        with h.acting_for(ALICE):
            msg = await helper.reply(UserMsg("worker", q))
        return msg.get_text_content() or ""

    worker = make_agent(ScriptedModel([calls(("help_owner", {"q": "x"})), text("bob's answer")]),
                        hw.instrument(Toolkit(tools=[tool(help_owner)])), hw.middlewares(), name="worker")

    async def ask(q: str) -> str:
        with hw.acting_for(BOB):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.sleep(0.5)
    hr, wr = h.last_report(helper), hw.last_report(worker)
    detail = (LOG, hr.terminal_state, hr.reason, wr.terminal_state, wr.reason)
    assert (hr.terminal_state, hr.reason) == (TerminalState.INCOMPLETE, "deadline"), detail
    assert LOG == [("notes", "a-1")], detail


async def test_bobs_parked_worker_resumed_inside_alices_block_ends_with_its_own_answer():
    """Bob's job on a worker (worker Harness `deadline_s=30`) parks on a human's confirmation.
    Later Alice's lead (`deadline_s=0.5`) resumes it from a tool under `acting_for(BOB)` (the
    worker serving Bob). README: timed by Alice's deadline while her run is live, "the reply
    ends first, with its own answer". The resumed reply's tools read 2 notes of 0.4 s. Should:
    Bob's resumed job ends `incomplete` (`deadline`), not `cancelled` at Alice's cut."""
    fresh(0.4)
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(deadline_s=30, tools={
        **POLICIES, "refund": ToolPolicy(ask_when=lambda a: "refunds need a human")}),
        load_entry_points=False, environ={})

    async def refund(order_id: str) -> str:
        """Refund.

        Args:
            order_id (str): Order.
        """
        LOG.append(("refund", order_id))
        return "refunded"

    worker = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("notes", {"q": "b-1"})),
                                       calls(("notes", {"q": "b-2"})), text("bob's answer")]),
                        hw.instrument(Toolkit(tools=[tool(refund), tool(notes)])), hw.middlewares(), name="worker")
    asks: list = []
    with hw.acting_for(BOB):
        async for ev in worker.reply_stream(UserMsg("bob", "refund A-1")):
            if isinstance(ev, RequireUserConfirmEvent):
                asks.append(ev)
    assert asks, "Bob's job parked"

    async def ask(q: str) -> str:
        a = asks[-1]
        answers = [ConfirmResult(confirmed=True, tool_call=c) for c in a.tool_calls]
        with hw.acting_for(BOB):
            said = [item.get_text_content() or "" async for item in worker.reply_stream(
                UserConfirmResultEvent(reply_id=a.reply_id, confirm_results=answers), yield_final_msg=True)
                if isinstance(item, Msg)]
        return " ".join(said)

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.sleep(0.5)
    wr = hw.last_report(worker)
    detail = (LOG, wr.terminal_state, wr.reason)
    assert (wr.terminal_state, wr.reason) == (TerminalState.INCOMPLETE, "deadline"), detail
    assert LOG == [("refund", "A-1"), ("notes", "b-1")], detail

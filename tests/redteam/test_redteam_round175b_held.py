"""Red team 175 b: attacks expected to hold (tasks made in a block, the tool adapter alone,
shadow mode)."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, DELAY, LOG, POLICIES, ask_lead, fresh, notes_agent
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState


async def test_task_made_in_bob_block_reentering_alice_while_she_is_live_is_her_work():
    """A task created inside `acting_for(BOB)` later enters `acting_for(ALICE)` while Alice's
    run is live: her work (her `max_tool_calls=3`: `ask`, `wait` and 1 note)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=3), load_entry_points=False, environ={})
    sub = notes_agent(h, "alice_sub")
    jobs: list = []

    async def job():
        with h.acting_for(ALICE):
            return await sub.reply(UserMsg("job", "go"))

    async def ask(q: str) -> str:
        """Ask.

        Args:
            q (str): What.
        """
        with h.acting_for(BOB):
            jobs.append(asyncio.create_task(job()))
        return "started"

    async def wait(s: str) -> str:
        """Wait.

        Args:
            s (str): Why.
        """
        await asyncio.gather(*jobs)
        return "waited"

    lead = make_agent(ScriptedModel([calls(("ask", {"q": "x"})), calls(("wait", {"s": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(ask), tool(wait)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    sr = h.last_report(sub)
    assert len(LOG) <= 1, (LOG, sr.terminal_state, sr.reason)


async def test_tool_adapter_only_bob_worker_in_block_ends_with_its_own_answer_at_alices_deadline():
    """The worker with the tool adapter alone, awaited under `acting_for(BOB)` in Alice's tool
    (`deadline_s=0.5`): its notes (0.4 s) are cut before Alice's cut; Alice's lead is not
    cancelled and the worker's first note ran."""
    fresh(0.4)
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, deadline_s=30), load_entry_points=False, environ={})
    worker = notes_agent(hw, "worker", n=2, agent_adapter=False)
    got: list = []

    async def ask(q: str) -> str:
        with hw.acting_for(BOB):
            try:
                msg = await worker.reply(UserMsg("lead", q))
            except asyncio.CancelledError:
                got.append("cancelled")
                raise
        got.append(msg.get_text_content())
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.sleep(0.3)
    DELAY[0] = 0.0
    assert got and got[0] != "cancelled", (got, LOG)
    assert LOG[:1] == [("notes", "worker-0")], (got, LOG)


async def test_shadow_lead_bob_block_does_not_enforce_or_leak():
    """A shadow Harness lead (`max_tool_calls=1`, in shadow): Bob's job under an enforcing
    worker Harness in its block is Bob's (3 notes, its own cap of 3 none refused); Alice's shadow
    report does not list it."""
    fresh()
    hs = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=1, mode="shadow"), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=3), load_entry_points=False, environ={})
    worker = notes_agent(hw, "worker")

    async def ask(q: str) -> str:
        """Ask.

        Args:
            q (str): What.
        """
        with hw.acting_for(BOB):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("ask", {"q": "x"})), text("done")]),
                      hs.instrument(Toolkit(tools=[tool(ask)])), hs.middlewares(), name="lead")
    with hs.acting_for(ALICE):
        await run(lead, "go")
    wr, lr = hw.last_report(worker), hs.last_report(lead)
    assert len(LOG) == 3 and wr.terminal_state == TerminalState.COMPLETED, (LOG, wr.terminal_state, wr.reason)
    assert lr.children == [], lr.children

"""Red team 175 b: attacks expected to hold (tasks made in a block, the tool adapter alone,
shadow mode)."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy

ALICE = Principal(user_id="alice", tenant="acme")
BOB = Principal(user_id="bob", tenant="acme")
LOG: list = []
SLOW = [0.0]


async def notes(q: str) -> str:
    """Read notes.

    Args:
        q (str): Query.
    """
    await asyncio.sleep(SLOW[0])
    LOG.append(("notes", q))
    return f"note about {q}: fine"


POLICIES = {"notes": ToolPolicy(role="retrieval"), "ask": ToolPolicy(role="other"), "wait": ToolPolicy(role="other")}


def _worker(h: Harness, name: str, n: int = 3, agent_adapter: bool = True):
    model = ScriptedModel([*(calls(("notes", {"q": f"{name}-{i}"})) for i in range(n)), text(f"{name} done")])
    return make_agent(model, h.instrument(Toolkit(tools=[tool(notes)])),
                      h.middlewares() if agent_adapter else h.middlewares()[1:], name=name)


async def test_task_made_in_bob_block_reentering_alice_while_she_is_live_is_her_work():
    """A task created inside `acting_for(BOB)` later enters `acting_for(ALICE)` while Alice's
    run is live: her work (her `max_tool_calls=3`: `ask`, `wait` and 1 note)."""
    LOG.clear()
    SLOW[0] = 0.0
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=3), load_entry_points=False, environ={})
    sub = _worker(h, "alice_sub")
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
    LOG.clear()
    SLOW[0] = 0.4
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, deadline_s=30), load_entry_points=False, environ={})
    worker = _worker(hw, "worker", n=2, agent_adapter=False)
    got: list = []

    async def ask(q: str) -> str:
        """Ask.

        Args:
            q (str): What.
        """
        with hw.acting_for(BOB):
            try:
                msg = await worker.reply(UserMsg("lead", q))
            except asyncio.CancelledError:
                got.append("cancelled")
                raise
        got.append(msg.get_text_content())
        return msg.get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("ask", {"q": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(ask)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.sleep(0.3)
    SLOW[0] = 0.0
    assert got and got[0] != "cancelled", (got, LOG)
    assert LOG[:1] == [("notes", "worker-0")], (got, LOG)


async def test_shadow_lead_bob_block_does_not_enforce_or_leak():
    """A shadow Harness lead (`max_tool_calls=1`, in shadow): Bob's job under an enforcing
    worker Harness in its block is Bob's (3 notes, its own cap of 3 none refused); Alice's shadow
    report does not list it."""
    LOG.clear()
    SLOW[0] = 0.0
    hs = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=1, mode="shadow"), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=3), load_entry_points=False, environ={})
    worker = _worker(hw, "worker")

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

"""Red team 175 b: work escaping Alice's caps through `acting_for` blocks, and what held."""
from __future__ import annotations

import asyncio
import contextvars
import gc
import weakref

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, LOG, POLICIES, ask_lead, fresh, lead_agent, notes, notes_agent
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState
from agentscope_harness.run_state import current_run


@pytest.mark.xfail(strict=True, reason="README limit: a generator suspended inside acting_for leaves its "
                   "caller's context bound (Python's context variables are not scoped to generators)")
async def test_async_generator_left_inside_a_bob_block_does_not_unbind_alices_later_subagent():
    """A tool reads the first item of an async generator helper that streams Bob's job
    under `with hw.acting_for(BOB)` and stops reading (`break`: the generator stays suspended
    inside the block until collected). The same tool then runs Alice's own sub-agent (no
    `acting_for`): README "Nested runs share every enclosing budget": a sub-agent run from a
    tool answers to its lead's caps (`max_tool_calls=2`: the lead's `ask` is 1, so 1 note).
    Broken if the suspended block leaves the tool's context set aside: the sub-agent opens for
    Bob, outside Alice's run."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    bob_worker = make_agent(ScriptedModel([text("bob's answer")]), h.instrument(Toolkit(tools=[tool(notes)])),
                            h.middlewares(), name="bob_worker")
    sub = notes_agent(h, "alice_sub")

    async def stream_for(who, agent, msg):
        with h.acting_for(who):
            async for ev in agent.reply_stream(msg):
                yield ev

    async def ask(q: str) -> str:
        gen = stream_for(BOB, bob_worker, UserMsg("lead", "peek"))
        async for _ in gen:
            break
        msg = await sub.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr, sr = h.last_report(lead), h.last_report(sub)
    detail = (LOG, sr.principal, sr.terminal_state, sr.reason, [c.run_id for c in lr.children])
    assert len(LOG) <= 1, detail  # committed code (HEAD): 1 note, the sub-agent nested in Alice
    assert sr.run_id in [c.run_id for c in lr.children], detail


async def test_set_aside_chain_does_not_keep_a_settled_run_alive():
    """A task started inside a Bob block outlives Alice's run (it holds the context that set
    her run aside). After Alice's run settled and the lead agent is dropped, her RunState must
    be freed (weak handles only)."""
    h = Harness(HarnessConfig(tools=POLICIES), load_entry_points=False, environ={})
    refs: list = []
    release = asyncio.Event()
    jobs: list = []

    async def held():
        await release.wait()

    async def start(why: str) -> str:
        """Start.

        Args:
            why (str): Why.
        """
        refs.append(weakref.ref(current_run()))
        with h.acting_for(BOB):
            jobs.append(asyncio.create_task(held()))
            ctx = contextvars.copy_context()
        jobs.append(ctx)
        return "started"

    lead = lead_agent(h, [start], [calls(("start", {"why": "x"})), text("done")])
    with h.acting_for(ALICE):
        await run(lead, "go")
    assert h.last_report(lead).terminal_state == TerminalState.COMPLETED
    del lead
    h.table  # noqa: B018
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0)
    alive = refs[0]() is not None
    release.set()
    await jobs[0]
    assert not alive, "Alice's settled run is kept alive by the set-aside chain"


async def test_three_callers_a_b_a_b_and_nested_same_key_and_exception_restore():
    """Held? A -> B -> A -> B inside Alice's run (`max_tool_calls=2`): the innermost Bob job is
    Bob's (all 3 notes run, not in Alice's children); the A level is Alice's (1 note at most);
    `acting_for(BOB)` nested twice changes nothing; an exception inside the block restores the
    tool's context (a later sub-agent is Alice's, bound by her cap)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=3), load_entry_points=False, environ={})
    inner_bob = notes_agent(h, "inner_bob")
    mid_alice = notes_agent(h, "mid_alice")
    after = notes_agent(h, "after")
    seen: list = []

    async def ask(q: str) -> str:
        with h.acting_for(BOB):
            with h.acting_for(ALICE):
                seen.append(("A", current_run() is not None))
                with h.acting_for(BOB):
                    with h.acting_for(BOB):
                        seen.append(("B", current_run()))
                        await inner_bob.reply(UserMsg("lead", q))
        try:
            with h.acting_for(BOB):
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        seen.append(("after", current_run() is not None))
        await mid_alice.reply(UserMsg("lead", q))
        await after.reply(UserMsg("lead", q))
        return "ok"

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr = h.last_report(lead)
    ib = h.last_report(inner_bob)
    detail = (LOG, seen, ib.principal, [c.agent for c in lr.children])
    assert [q for _, q in LOG if q.startswith("inner_bob")] == ["inner_bob-0", "inner_bob-1", "inner_bob-2"], detail
    assert len([q for _, q in LOG if not q.startswith("inner_bob")]) <= 2, detail
    assert ib.run_id not in [c.run_id for c in lr.children], detail
    assert seen[0] == ("A", True) and seen[1] == ("B", None) and seen[2] == ("after", True), detail

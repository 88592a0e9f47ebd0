"""Red team on round 175 a: `acting_for(<another caller>)` clears the run context. What
happens to the SAME caller's work entered again inside that block (or inside the other
caller's run), and to a lead that acts for nobody."""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, LOG, POLICIES, ask_lead, fresh, notes_agent
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy


@pytest.mark.parametrize("inner", [ALICE, None], ids=["alice", "nobody"])
async def test_alices_work_reentered_inside_a_bob_block_still_counts_on_alices_cap(inner):
    """Alice's lead may make 2 tool calls. Its tool serves a job under `acting_for(BOB)` and,
    inside that block, a sub-agent for Alice herself (`acting_for(ALICE)`, e.g. the shared
    worker's helper that reports back to the job's owner, or a library wrapping its work in
    `acting_for(job.owner)`). README: only "another `Principal.key` than the run's" is not the
    run's work; Alice's sub-agent is Alice's: it should answer to her `max_tool_calls=2` (the
    lead's own `ask` is 1 of them, so at most 1 of the sub-agent's 3 notes runs). Round 175 b:
    `acting_for(None)` inside the block (a library clearing the caller for a helper) is no
    other caller either: the sub-agent ran 3 notes with no principal, outside every cap."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    sub = notes_agent(h, "alice_sub")

    async def ask(q: str) -> str:
        with h.acting_for(BOB):
            with h.acting_for(inner):
                msg = await sub.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr, sr = h.last_report(lead), h.last_report(sub)
    detail = (LOG, sr.principal, sr.terminal_state, sr.reason, [c.run_id for c in lr.children])
    assert len(LOG) <= 1, detail
    assert [c.run_id for c in lr.children] == [sr.run_id], detail
    assert sr.principal["user_id"] == "alice", detail


async def test_alices_subagent_run_by_bobs_job_tool_is_bound_by_alices_live_cap():
    """Same, the realistic shape: Alice's tool awaits a shared worker serving Bob
    (`acting_for(BOB)`); the worker's own tool hands a piece back to a helper agent for
    Alice (`acting_for(ALICE)`). Alice's helper's 3 tool calls should answer to Alice's
    `max_tool_calls=2` (her lead's `ask` already made 1)."""
    fresh()
    h = Harness(HarnessConfig(tools={**POLICIES, "notify_owner": ToolPolicy(role="other")}, max_tool_calls=2),
                load_entry_points=False, environ={})
    helper = notes_agent(h, "alice_helper")

    async def notify_owner(q: str) -> str:
        """Notify the owner.

        Args:
            q (str): What.
        """
        with h.acting_for(ALICE):
            msg = await helper.reply(UserMsg("worker", q))
        return msg.get_text_content() or ""

    worker = make_agent(ScriptedModel([calls(("notify_owner", {"q": "n"})), text("bob done")]),
                        h.instrument(Toolkit(tools=[tool(notify_owner)])), h.middlewares(), name="worker")

    async def ask(q: str) -> str:
        with h.acting_for(BOB):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    hr = h.last_report(helper)
    detail = (LOG, hr.principal, hr.terminal_state, hr.reason)
    assert len(LOG) <= 1, detail


async def test_a_stopped_alices_background_job_reentered_through_bob_stays_bound():
    """README "Choices": a background task the stopped run started, "a run of the same
    principal opened in that task is part of the stopped task". Alice's lead is stopped
    (`max_model_calls=2`); the task her tool started serves Bob and, inside Bob's block, a
    sub-agent for Alice. That Alice run, opened in the stopped run's task, should be bound
    (`run_concluded`: no tool call runs)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_model_calls=2), load_entry_points=False, environ={})
    sub = notes_agent(h, "alice_sub")
    jobs: list = []

    async def job():
        await asyncio.sleep(0.3)  # after the lead settled, stopped
        with h.acting_for(BOB):
            with h.acting_for(ALICE):
                return await sub.reply(UserMsg("job", "go"))

    async def start(why: str) -> str:
        """Start.

        Args:
            why (str): Why.
        """
        jobs.append(asyncio.create_task(job()))
        return "started"

    async def wait(s: str) -> str:
        """Wait.

        Args:
            s (str): Why.
        """
        return "waited"

    lead = make_agent(ScriptedModel([calls(("start", {"why": "x"})), calls(("wait", {"s": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(start), tool(wait)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr = h.last_report(lead)
    assert (lr.terminal_state, lr.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (lr.terminal_state, lr.reason)
    await asyncio.gather(*jobs)
    sr = h.last_report(sub)
    detail = (LOG, sr.principal, sr.terminal_state, sr.reason)
    assert LOG == [], detail
    assert (sr.terminal_state, sr.reason) == (TerminalState.INCOMPLETE, "run_concluded"), detail


async def test_control_same_stopped_task_without_bob_block_is_bound():
    """Control for the previous test: without the Bob block in between, the same Alice
    sub-agent in the stopped task is bound (README's promise as it stands)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_model_calls=2), load_entry_points=False, environ={})
    sub = notes_agent(h, "alice_sub")
    jobs: list = []

    async def job():
        await asyncio.sleep(0.3)
        with h.acting_for(ALICE):
            return await sub.reply(UserMsg("job", "go"))

    async def start(why: str) -> str:
        """Start.

        Args:
            why (str): Why.
        """
        jobs.append(asyncio.create_task(job()))
        return "started"

    async def wait(s: str) -> str:
        """Wait.

        Args:
            s (str): Why.
        """
        return "waited"

    lead = make_agent(ScriptedModel([calls(("start", {"why": "x"})), calls(("wait", {"s": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(start), tool(wait)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.gather(*jobs)
    sr = h.last_report(sub)
    assert LOG == [] and sr.reason == "run_concluded", (LOG, sr.terminal_state, sr.reason)


async def test_an_anonymous_leads_caps_bind_a_subagent_bound_to_a_user():
    """A lead that acts for nobody (a batch/orchestrator run; no `acting_for`) with
    `max_tool_calls=2`; its tool runs a per-user sub-agent under `acting_for(ALICE)` (to apply
    her `allowed_tools` and quota). README "Nested runs share every enclosing budget": the
    exception is "another `Principal.key` than the run's"; a run with no principal has no
    `Principal.key`. Happened? the sub-agent opens outside the lead: its 3 calls run."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    sub = notes_agent(h, "per_user")

    async def ask(q: str) -> str:
        with h.acting_for(ALICE):
            msg = await sub.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    await run(lead, "go")
    lr, sr = h.last_report(lead), h.last_report(sub)
    detail = (LOG, sr.principal, sr.terminal_state, sr.reason, lr.children)
    assert len(LOG) <= 1, detail
    assert [c.run_id for c in lr.children] == [sr.run_id], detail


async def test_plain_subagent_is_capped_by_lead():
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    sub = notes_agent(h, "alice_sub")

    async def ask(q: str) -> str:
        msg = await sub.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    lr, sr = h.last_report(lead), h.last_report(sub)
    assert len(LOG) <= 1, (LOG, sr.terminal_state, sr.reason, lr.children)
    assert [c.run_id for c in lr.children] == [sr.run_id]

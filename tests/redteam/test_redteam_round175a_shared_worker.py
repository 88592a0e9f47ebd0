"""Round 175 a (open item of round 174 a): a shared worker a live lead's tool started,
serving another principal, nested that principal's runs in the lead: Bob's calls counted on
Alice's caps, Alice's deadline timed Bob's job, and Alice's stop ended it. README "Choices":
another principal's run opened there "(a shared worker a tool started, serving everyone) is a
task of its own"."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, BOB, LOG, POLICIES, fresh, notes
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy


def _setup(h: Harness, lead_script: list, wait_s: float, job_after_s: float = 0.2, notes_s: float = 0.0,
           hw: Harness | None = None):
    """A lead whose `start_worker` tool starts a shared worker (under `hw`, default `h`) that
    serves Bob's job after `job_after_s`; its `wait` tool sleeps `wait_s`, the worker's
    `notes` `notes_s`."""
    hw = hw or h
    fresh(notes_s)
    worker_model = ScriptedModel([calls(("notes", {"q": "bob-1"})), calls(("notes", {"q": "bob-2"})),
                                  text("bob's answer")])
    worker = make_agent(worker_model, hw.instrument(Toolkit(tools=[tool(notes)])), hw.middlewares(), name="worker")
    jobs: list = []

    async def serve_bob():
        await asyncio.sleep(job_after_s)
        with hw.acting_for(BOB):
            return await worker.reply(UserMsg("bob", "look up my notes"))

    async def start_worker(why: str) -> str:
        """Start the shared worker.

        Args:
            why (str): Why.
        """
        jobs.append(asyncio.create_task(serve_bob()))
        return "started"

    async def wait(s: str) -> str:
        """Wait.

        Args:
            s (str): Why.
        """
        await asyncio.sleep(wait_s)
        return "waited"

    lead = make_agent(ScriptedModel(lead_script), h.instrument(Toolkit(tools=[tool(start_worker), tool(wait)])),
                      h.middlewares(), name="lead")
    return lead, worker, worker_model, jobs


async def test_bobs_job_on_a_shared_worker_is_not_counted_on_alices_caps():
    """Alice's lead may make 2 tool calls; it makes 2 (start the worker, wait) while Bob's job
    on the worker makes 2 of its own. Happened: Bob's job nested in Alice's live lead, its
    calls refused `quota_exhausted` on her cap. Should: Bob's job is a task of its own."""
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    lead, worker, worker_model, jobs = _setup(
        h, [calls(("start_worker", {"why": "x"})), calls(("wait", {"s": "bob"})), text("done")], 0.8)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.gather(*jobs)
    wr = h.last_report(worker)
    detail = (LOG, wr.terminal_state, wr.reason, list(wr.refusals))
    assert LOG == [("notes", "bob-1"), ("notes", "bob-2")], detail
    assert wr.terminal_state == TerminalState.COMPLETED, detail
    assert wr.principal["user_id"] == "bob", detail
    assert h.last_report(lead).children == [], h.last_report(lead).children


async def test_alices_deadline_does_not_time_bobs_job():
    """Alice's lead has `deadline_s=0.5` and completes at once; Bob's job starts after her
    deadline passed (0.8 s). The worker's context carries Alice's run handle, whose deadline
    `current_deadline` reads. Should: Bob's run is timed by its own deadline."""
    h = Harness(HarnessConfig(tools=POLICIES, deadline_s=0.5), load_entry_points=False, environ={})
    lead, worker, worker_model, jobs = _setup(h, [calls(("start_worker", {"why": "x"})), text("done")], 0.0,
                                              job_after_s=0.8)
    with h.acting_for(ALICE):
        await run(lead, "go")
    assert h.last_report(lead).terminal_state == TerminalState.COMPLETED
    await asyncio.gather(*jobs)
    wr = h.last_report(worker)
    detail = (LOG, wr.terminal_state, wr.reason)
    assert wr.terminal_state == TerminalState.COMPLETED, detail
    assert LOG == [("notes", "bob-1"), ("notes", "bob-2")], detail


async def test_alices_stop_does_not_end_bobs_job_in_flight():
    """Alice's lead is stopped (`max_model_calls=2`: it starts the worker, waits, and its
    third model call is refused) while Bob's job is in flight on the worker (another
    Harness, no caps; its first `notes` call runs 0.4 s). Happened: Bob's job nested in
    Alice's lead, ended `incomplete` by her stop. Should: Bob's job finishes; Alice's stop
    binds her work only."""
    h = Harness(HarnessConfig(tools=POLICIES, max_model_calls=2), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES), load_entry_points=False, environ={})
    lead, worker, worker_model, jobs = _setup(
        h, [calls(("start_worker", {"why": "x"})), calls(("wait", {"s": "a"})), text("done")], 0.2,
        job_after_s=0.0, notes_s=0.4, hw=hw)
    with h.acting_for(ALICE):
        await run(lead, "go")
    await asyncio.gather(*jobs)
    wr = hw.last_report(worker)
    lr = h.last_report(lead)
    assert (lr.terminal_state, lr.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (lr.terminal_state, lr.reason)
    detail = (LOG, wr.terminal_state, wr.reason)
    assert wr.terminal_state == TerminalState.COMPLETED, detail
    assert LOG == [("notes", "bob-1"), ("notes", "bob-2")], detail


async def _lead_awaiting_worker_as(h: Harness, who: Principal):
    """A lead whose `ask_worker` tool awaits the worker under `acting_for(who)`."""
    fresh()
    worker = make_agent(ScriptedModel([calls(("notes", {"q": "w"})), text("worker's answer")]),
                        h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="worker")

    async def ask_worker(q: str) -> str:
        """Ask the worker.

        Args:
            q (str): What.
        """
        with h.acting_for(who):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("ask_worker", {"q": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(ask_worker)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    return h.last_report(lead), h.last_report(worker)


async def test_an_awaited_reply_for_another_caller_is_a_task_of_its_own():
    """README "Nested runs": a reply a tool runs under `acting_for(<another caller>)` opens
    outside the run, not in the lead's `children`; the same caller (other attributes, one
    `Principal.key`) stays the lead's sub-agent."""
    h = Harness(HarnessConfig(tools={**POLICIES, "ask_worker": ToolPolicy(role="other")}),
                load_entry_points=False, environ={})
    lr, wr = await _lead_awaiting_worker_as(h, BOB)
    assert lr.children == [] and wr.principal["user_id"] == "bob", (lr.children, wr.principal)
    assert wr.terminal_state == TerminalState.COMPLETED and LOG == [("notes", "w")], (wr.terminal_state, LOG)
    lr, wr = await _lead_awaiting_worker_as(h, Principal(user_id="alice", tenant="acme", request_id="r-2"))
    assert [c.run_id for c in lr.children] == [wr.run_id], lr.children

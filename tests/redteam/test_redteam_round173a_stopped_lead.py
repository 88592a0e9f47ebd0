"""Round 173 a (a red team on round 172): a job a sub-agent's tool started reached neither
its lead's caps nor its stop (the sub-agent settled first: its handle now leads to its
lead's), and round 172 c bound every later user's job of a shared worker a stopped lead's
tool started (a stop binds its own principal's runs only)."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, LOG, fresh, notes
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy


async def test_background_grandchild_of_a_stopped_lead_runs_past_the_stop():
    """README "Choices": "A run stopped short of its task (incomplete or failed: ... a cap ...)
    by an enforcing Harness binds every sub-agent nested in it, awaited or started in a
    background task, before the lead settles and after: their tool calls are refused
    `run_concluded` and their next model call is not made"; `max_model_calls` is
    "run-wide, sub-agents included" (round 172 c fixed this for the lead's own worker).

    Attack: the lead awaits a sub-agent (`research`) whose tool starts a background job
    (asyncio.create_task, a job queue) and which then completes; the lead goes on and hits
    `max_model_calls=4` (`incomplete`); the job's sub-agent (`crawler`) opens its reply a
    moment later.

    Happened: the job's context holds the *sub-agent's* handle, and that was stamped
    `stopped=None` when the sub-agent settled (`completed`, the lead still live): the
    crawler runs as a fresh root run of Alice: two more model calls and its `notes` tool,
    `completed`, past the lead's stop and its run-wide cap. Should: bound as part of the
    stopped lead (no model call, `incomplete`, `run_concluded`), as the lead's own
    background worker now is."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "start_job": ToolPolicy(role="other"),
                                     "research": ToolPolicy(role="other")},
                              max_model_calls=4), load_entry_points=False, environ={})
    crawler_model = ScriptedModel([calls(("notes", {"q": "bg"})), text("crawled")])
    crawler = make_agent(crawler_model, h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="crawler")
    jobs = []

    async def job():
        await asyncio.sleep(0.3)  # picked up from the queue a moment later
        return await crawler.reply(UserMsg("research", "crawl the site"))

    async def start_job(site: str) -> str:
        """Queue a crawl.

        Args:
            site (str): What.
        """
        jobs.append(asyncio.create_task(job()))
        return "queued"

    sub_model = ScriptedModel([calls(("start_job", {"site": "x"})), text("crawl queued")])
    sub = make_agent(sub_model, h.instrument(Toolkit(tools=[tool(start_job)])), h.middlewares(), name="researcher")

    async def research(topic: str) -> str:
        """Research a topic.

        Args:
            topic (str): What.
        """
        msg = await sub.reply(UserMsg("lead", f"research {topic}"))
        return msg.get_text_content() or ""

    lead_model = ScriptedModel([calls(("research", {"topic": "x"})), calls(("notes", {"q": "more"})),
                                calls(("notes", {"q": "again"})), text("x")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(research), tool(notes)])), h.middlewares(),
                      name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    r = h.last_report(lead)
    assert h.last_report(sub).terminal_state == TerminalState.COMPLETED
    assert (r.terminal_state, r.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (r.terminal_state, r.reason)
    assert jobs and not jobs[0].done()  # the crawl opens after the lead settled
    await jobs[0]
    cr = h.last_report(crawler)
    detail = (LOG, len(crawler_model.calls), cr.terminal_state, cr.reason)
    assert ("notes", "bg") not in LOG, detail
    assert len(crawler_model.calls) == 0, detail
    assert cr.terminal_state == TerminalState.INCOMPLETE, detail


async def test_background_grandchild_opened_while_the_lead_is_live_escapes_its_caps_and_stop():
    """Same promise, "before the lead settles": the sub-agent's background job opens its
    crawler while the lead is still live (the lead waits in a slow tool), after the
    sub-agent completed.

    Happened: `live_parent` finds the sub-agent settled, so the crawler is a root run of
    its own: its model calls are not counted in the lead's run-wide `max_model_calls=4`,
    and when the lead is stopped by that cap the crawler goes on (its next model call is
    made, `completed`). Should: nested in the lead (the run its settled parent was part
    of): counted, and bound by the lead's stop."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "start_job": ToolPolicy(role="other"),
                                     "research": ToolPolicy(role="other"), "wait": ToolPolicy(role="retrieval"),
                                     "slow_notes": ToolPolicy(role="retrieval")},
                              max_model_calls=4), load_entry_points=False, environ={})

    async def slow_notes(q: str) -> str:
        """Read notes slowly.

        Args:
            q (str): Query.
        """
        await asyncio.sleep(1.0)
        LOG.append(("slow_notes", q))
        return "fine"

    async def wait(s: str) -> str:
        """Wait a little.

        Args:
            s (str): Why.
        """
        await asyncio.sleep(0.5)
        return "waited"

    crawler_model = ScriptedModel([calls(("slow_notes", {"q": "bg"})), text("crawled")])
    crawler = make_agent(crawler_model, h.instrument(Toolkit(tools=[tool(slow_notes)])), h.middlewares(),
                         name="crawler")
    jobs = []

    async def job():
        await asyncio.sleep(0.1)
        return await crawler.reply(UserMsg("research", "crawl the site"))

    async def start_job(site: str) -> str:
        """Queue a crawl.

        Args:
            site (str): What.
        """
        jobs.append(asyncio.create_task(job()))
        return "queued"

    sub_model = ScriptedModel([calls(("start_job", {"site": "x"})), text("crawl queued")])
    sub = make_agent(sub_model, h.instrument(Toolkit(tools=[tool(start_job)])), h.middlewares(), name="researcher")

    async def research(topic: str) -> str:
        """Research a topic.

        Args:
            topic (str): What.
        """
        msg = await sub.reply(UserMsg("lead", f"research {topic}"))
        return msg.get_text_content() or ""

    lead_model = ScriptedModel([calls(("research", {"topic": "x"})), calls(("wait", {"s": "crawl"})),
                                calls(("notes", {"q": "again"})), text("x")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(research), tool(wait), tool(notes)])),
                      h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    r = h.last_report(lead)
    assert (r.terminal_state, r.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (r.terminal_state, r.reason)
    await jobs[0]
    cr = h.last_report(crawler)
    total = len(lead_model.calls) + len(sub_model.calls) + len(crawler_model.calls)
    detail = (LOG, total, len(crawler_model.calls), cr.terminal_state, cr.reason)
    assert total <= 4, detail
    assert cr.terminal_state == TerminalState.INCOMPLETE, detail


BOB = Principal(user_id="u-77", tenant="acme")


async def test_shared_job_worker_started_by_a_stopped_lead_refuses_every_later_users_job():
    """README "Choices": "A lead that completed or waits for its user leaves its sub-agents
    to their own rules (a background worker goes on)"; only work *nested in* a run stopped
    short is bound by it.

    Attack: a common job-queue pattern: the first `summarize` call in the process starts
    one shared consumer task (lazily, from inside the tool: it copies that lead's context);
    the consumer runs each job's sub-agent acting for the job's owner
    (`h.acting_for(owner)`). Alice's lead is the first caller and is then stopped by
    `max_model_calls` (`incomplete`). Later Bob's lead (its own run, no cap hit) queues a
    job and awaits it.

    Happened: the consumer's context keeps Alice's stopped handle, so Bob's sub-agent run
    is opened `bound_by` Alice's end: refused `run_concluded`, no model call, and Bob's
    lead gets nothing; so does every later job of every user, for the life of the process.
    Should: Bob's job, acting for Bob on behalf of a run that is live and not stopped, runs
    (before round 172 c it did)."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "summarize": ToolPolicy(role="other")},
                              max_model_calls=2), load_entry_points=False, environ={})
    sub_model = ScriptedModel([text("summary A"), calls(("notes", {"q": "bob"})), text("summary B")])
    sub = make_agent(sub_model, h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="summarizer")
    queue: asyncio.Queue = asyncio.Queue()
    consumer: list = []

    async def consume():
        while True:
            owner, what, done = await queue.get()
            with h.acting_for(owner):
                msg = await sub.reply(UserMsg("queue", what))
            done.set_result(msg.get_text_content() or "")

    async def summarize(doc: str) -> str:
        """Summarize a document (queued to the shared summarizer).

        Args:
            doc (str): Which.
        """
        if not consumer:
            consumer.append(asyncio.create_task(consume()))
        done = asyncio.get_running_loop().create_future()
        await queue.put((ALICE if doc == "a" else BOB, f"summarize {doc}", done))
        return await done

    alice_model = ScriptedModel([calls(("summarize", {"doc": "a"})), calls(("notes", {"q": "more"})), text("x")])
    alice_lead = make_agent(alice_model, h.instrument(Toolkit(tools=[tool(summarize), tool(notes)])),
                            h.middlewares(), name="alice_lead")
    with h.acting_for(ALICE):
        await run(alice_lead, "go")
    ra = h.last_report(alice_lead)
    assert (ra.terminal_state, ra.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (ra.terminal_state,
                                                                                              ra.reason)
    bob_model = ScriptedModel([calls(("summarize", {"doc": "b"})), text("Here is your summary.")])
    bob_lead = make_agent(bob_model, h.instrument(Toolkit(tools=[tool(summarize), tool(notes)])),
                          h.middlewares(), name="bob_lead")
    try:
        with h.acting_for(BOB):
            await run(bob_lead, "summarize b")
        sr = h.last_report(sub)
        detail = (LOG, len(sub_model.calls), sr.terminal_state, sr.reason)
        assert ("notes", "bob") in LOG, detail
        assert sr.terminal_state == TerminalState.COMPLETED, detail
    finally:
        consumer[0].cancel()

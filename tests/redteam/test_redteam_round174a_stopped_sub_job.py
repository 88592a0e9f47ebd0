"""Round 174 a (a short red team on round 173 a): a job a stopped sub-agent's tool started,
opened while its lead still ran, nested in the live lead (173 a's handle walk) and escaped the
sub-agent's stop: a run opened in a stopped run's context is bound by it, nested or not."""
from __future__ import annotations

import asyncio

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, LOG, fresh, notes
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy


async def test_job_of_a_stopped_sub_agent_escapes_its_stop_while_the_lead_lives():
    """README "Choices": "A run stopped short of its task (`incomplete` or `failed`: a
    hook's `ctx.stop`, a cap, ...) by an enforcing Harness binds every sub-agent nested in
    it, awaited or started in a background task, before the lead settles and after: their
    tool calls are refused `run_concluded` and their next model call is not made". A
    sub-agent's own cap counts ("`max_model_calls` (its own, or that of any run it is
    nested in, whichever `Harness` opened it)").

    Attack: the lead (Harness without caps) awaits a researcher under its own Harness
    (`max_model_calls=1`); the researcher's tool queues a background crawl, then the
    researcher is stopped `incomplete` (`max_model_calls`). The crawl opens its crawler
    while the lead is still live (waiting in a slow tool).

    Happened: `live_parent` walks past the stopped researcher's handle to the live lead;
    the crawler nests in the lead (not stopped), and `bound_by` is read only for root
    runs, so the crawler makes its model calls and runs `notes`: work of a stopped run
    goes on. Before round 173 a the crawler opened as a root bound by the researcher's
    stop. Should: bound (no model call, `incomplete`, `run_concluded`)."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "research": ToolPolicy(role="other"),
                                     "wait": ToolPolicy(role="other")}), load_entry_points=False, environ={})
    h_sub = Harness(HarnessConfig(tools={"start_job": ToolPolicy(role="other")}, max_model_calls=1),
                    load_entry_points=False, environ={})
    crawler_model = ScriptedModel([calls(("notes", {"q": "bg"})), text("crawled")])
    crawler = make_agent(crawler_model, h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="crawler")
    jobs = []

    async def job():
        await asyncio.sleep(0.3)
        return await crawler.reply(UserMsg("research", "crawl the site"))

    async def start_job(site: str) -> str:
        """Queue a crawl.

        Args:
            site (str): What.
        """
        jobs.append(asyncio.create_task(job()))
        return "queued"

    sub_model = ScriptedModel([calls(("start_job", {"site": "x"})), calls(("start_job", {"site": "y"})),
                               text("crawl queued")])
    sub = make_agent(sub_model, h_sub.instrument(Toolkit(tools=[tool(start_job)])), h_sub.middlewares(),
                     name="researcher")

    async def research(topic: str) -> str:
        """Research a topic.

        Args:
            topic (str): What.
        """
        msg = await sub.reply(UserMsg("lead", f"research {topic}"))
        return msg.get_text_content() or ""

    async def wait(s: str) -> str:
        """Wait for the crawl.

        Args:
            s (str): Why.
        """
        await asyncio.sleep(1.0)
        return "waited"

    lead_model = ScriptedModel([calls(("research", {"topic": "x"})), calls(("wait", {"s": "crawl"})), text("done")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(research), tool(wait)])), h.middlewares(),
                      name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    sr = h_sub.last_report(sub)
    assert (sr.terminal_state, sr.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), (sr.terminal_state, sr.reason)
    await asyncio.gather(*jobs)
    cr = h.last_report(crawler)
    detail = (LOG, len(crawler_model.calls), cr.terminal_state, cr.reason)
    assert ("notes", "bg") not in LOG, detail
    assert len(crawler_model.calls) == 0, detail
    assert cr.terminal_state == TerminalState.INCOMPLETE, detail

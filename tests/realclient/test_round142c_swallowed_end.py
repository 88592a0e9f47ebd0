"""Round 142 c (scenarios: combining with AgentScope's middlewares), on AgentScope's
real `OpenAIChatModel`: a middleware of mine, first (the README's order), swallows the
first `ReplyEndEvent` (AgentScope's way to ask for another round); in that round the
model calls a 5 s tool under `deadline_s=1.5`.
What happened: the deadline held (the user told the time ran out after ~1.6 s) but
`on_report` fired once, at the swallowed end, and `last_report` said `completed`
(`answered`), 1 model call, `wall_s` 0.03. Should: `incomplete` (`deadline`), 2 model
calls, the report published last superseding the first (one run id).
"""
import asyncio
from typing import Any

from scripted import OneMoreRound, make_agent, run
from server import Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, RunReport, TerminalState


async def slow_tool(s: float) -> str:
    """Wait.

    Args:
        s (float): Seconds.
    """
    await asyncio.sleep(s)
    return "slept"


async def test_a_deadline_after_a_swallowed_end_is_the_reports_end(server: Any) -> None:
    published: list[RunReport] = []
    h = Harness(HarnessConfig(deadline_s=1.5, on_report=published.append), load_entry_points=False, environ={})
    server.plan(Reply(text="first answer"), Reply(tool_calls=[("slow_tool", {"s": 5})]), Reply(text="second"))
    agent = make_agent(model(server, "gpt-4o-mini"), [slow_tool], [OneMoreRound("Double-check with one more search."), *h.middlewares()])
    _, final = await run(agent, "research this")
    report = h.last_report(agent)
    assert "time allowed for it ran out" in (final.get_text_content() or "")
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert report.model_calls == 2 and report.wall_s >= 1.4
    assert published[-1] == report and {r.run_id for r in published} == {report.run_id}

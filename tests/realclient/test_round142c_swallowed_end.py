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

from agentscope.event import ReplyEndEvent
from agentscope.message import HintBlock
from agentscope.middleware import MiddlewareBase
from scripted import make_agent, run
from server import Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, RunReport, TerminalState


class OneMoreRound(MiddlewareBase):
    """A self-check middleware: swallows the first end after writing a hint."""

    def __init__(self) -> None:
        self.swallowed = 0

    async def get_middleware_key(self) -> str:
        return "one_more_round"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, ReplyEndEvent) and self.swallowed == 0:
                self.swallowed += 1
                agent.state.append_context(agent.name, [HintBlock(hint="Double-check with one more search.")])
                continue
            yield event


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
    agent = make_agent(model(server, "gpt-4o-mini"), [slow_tool], [OneMoreRound(), *h.middlewares()])
    _, final = await run(agent, "research this")
    report = h.last_report(agent)
    assert "time allowed for it ran out" in (final.get_text_content() or "")
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert report.model_calls == 2 and report.wall_s >= 1.4
    assert published[-1] == report and {r.run_id for r in published} == {report.run_id}

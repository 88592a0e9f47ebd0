"""Red team, round 96 (b). A caller's cancellation of a reply that lands as a
tool finishes is lost: with a run deadline the tool runs in a task of its
own, and ``_within_deadline`` catches the caller's ``CancelledError`` to
cancel that task and await its answer. A tool already done by then answers
normally, the ``CancelledError`` is swallowed, and the reply goes on: more
model calls, a ``completed`` run, for a user who pressed stop (a tool
AgentScope runs in sequence, ``is_concurrency_safe=False``: its call runs in
the reply's own task). Run inline
(no deadline, or before round 95) the same cancellation ends the reply
``cancelled``. README ("Security", "The deadline bounds tools too"): "A
caller's own cancellation is the tool's, as if it ran inline"."""

from __future__ import annotations

import asyncio

from scripted import ALICE, SlowModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState


async def _cancelled_as_the_tool_returns(config: HarnessConfig) -> tuple[Harness, SlowModel, object]:
    h = Harness(config, load_entry_points=False, environ={})
    finished = asyncio.Event()

    async def export_report(q: str) -> str:
        """Export a report.

        Args:
            q (str): What to export.
        """
        await asyncio.sleep(0.01)  # the export's I/O
        finished.set()  # the UI shows "exported"; the user presses stop at that moment
        return "exported"

    model = SlowModel([calls(("export_report", {"q": "q3"})), text("Exported, and emailed it."),
                           text("again")], delay=0.02)
    agent = make_agent(model, [tool(export_report, is_concurrency_safe=False)], h.middlewares())

    async def reply() -> None:
        with h.acting_for(ALICE):
            await run(agent, "export the q3 report")

    task = asyncio.create_task(reply())

    async def stop() -> None:
        await finished.wait()
        task.cancel()

    watcher = asyncio.create_task(stop())
    outcome = (await asyncio.gather(task, return_exceptions=True))[0]
    await watcher
    return h, model, (agent, outcome)


async def test_a_stop_landing_as_the_tool_returns_ends_the_reply_cancelled_as_inline() -> None:
    # without a deadline the tool runs inline: the stop ends the reply
    h0, model0, (agent0, _) = await _cancelled_as_the_tool_returns(HarnessConfig())
    assert h0.last_report(agent0).terminal_state is TerminalState.CANCELLED
    assert len(model0.calls) == 1
    # with a deadline the tool runs in its own task: the same stop must still end the reply
    h, model, (agent, _) = await _cancelled_as_the_tool_returns(HarnessConfig(deadline_s=30))
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.CANCELLED, report.terminal_state
    assert len(model.calls) == 1, "the model was called again after the user stopped the reply"

"""Red team, round 95 (stopping). A tool that takes its time to stop once
cancelled (it rolls back, closes a connection, flushes a buffer: 1.5 s of
cleanup on ``CancelledError``) holds the run well past its deadline: the
harness cancels it 0.1 s past the deadline, then waits for the cancellation
to finish, however long that takes. A 0.5 s deadline ends after 2 s.
README ("Configuration"): ``deadline_s`` is the "run deadline (monotonic;
bounds every model call, store call, async hook and tool call)"; "How it
works": "one still running 0.1 s past it is cancelled". The report already
has the words for a call the run stopped waiting for (``in_flight``: "side
effects that may still happen"), so the run need not wait for it."""

from __future__ import annotations

import asyncio
import time

from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, TerminalState

CLEANUP_S = 1.5


async def export_report(q: str) -> str:
    """Export a report.

    Args:
        q (str): What to export.
    """
    try:
        await asyncio.sleep(5)
    except asyncio.CancelledError:
        await asyncio.sleep(CLEANUP_S)  # a rollback that takes its time
        raise
    return "exported"


async def test_a_tool_slow_to_honour_its_cancellation_does_not_hold_the_run_past_its_deadline() -> None:
    h = Harness(HarnessConfig(deadline_s=0.5), load_entry_points=False)
    model = ScriptedModel([calls(("export_report", {"q": "q3"})), text("Exported.")])
    agent = make_agent(model, [export_report], h.middlewares())
    started = time.monotonic()
    with h.acting_for(ALICE):
        _, final = await run(agent, "export the q3 report")
    took = time.monotonic() - started
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert (final.get_text_content() or "").startswith("I could not complete this request")
    assert took < 1.2, f"a 0.5 s deadline took {took:.2f} s: the run waited for the tool's cleanup"
    assert any(entry.startswith("export_report:") for entry in report.in_flight), report.in_flight

"""The run's deadline bounds its tools: a tool still running
``TOOL_GRACE_S`` after it is cancelled, the model's context says the call
was stopped with its effect unknown, the run ends ``incomplete``
(``deadline``) without another model call, and the report keeps the call in
flight. A tool that honours ``clamp_timeout`` reports its own timeout first."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hookkit import Ran, drive, harnessed, shop_tools, stored_results
from scripted import calls, text

from agentscope_harness import HarnessConfig, clamp_timeout
from agentscope_harness.adapters.tool_adapter import DEADLINE_CUT, TOOL_GRACE_S
from agentscope_harness.deadline import current_deadline
from agentscope_harness.run_state import current_run
from agentscope_harness.sentinels import format_sentinel


def cut(name: str) -> str:
    return format_sentinel("run_concluded", DEADLINE_CUT.format(name=name))


def sleepy_tool(log: list[str]) -> Any:
    async def sleepy(seconds: float) -> str:
        """Wait, ignoring the run's deadline.

        Args:
            seconds (float): How long.
        """
        log.append("start")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        log.append("end")
        return "slept"

    return sleepy


async def test_a_tool_that_ignores_the_deadline_is_cut_at_it() -> None:
    log: list[str] = []
    h, model, agent = harnessed(
        HarnessConfig(deadline_s=0.5), [calls(("sleepy", {"seconds": 5})), text("never said")],
        [sleepy_tool(log)],
    )
    started = time.monotonic()
    _, final, report = await drive(h, agent)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 + TOOL_GRACE_S + 0.4, f"a 0.5 s run took {elapsed:.2f} s"
    assert log == ["start", "cancelled"]  # the tool was cancelled, not left running
    assert len(model.calls) == 1  # no model call after the deadline
    assert stored_results(agent) == [cut("sleepy")]
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert "never said" not in (final.get_text_content() or "")
    assert [entry.split(":")[0] for entry in report.in_flight] == ["sleepy"]  # its effect is unknown
    assert any(
        (d.hook, d.point, d.action, d.code, d.tool) == ("liveness_watchdog", "on_acting", "stop", "deadline", "sleepy")
        for d in report.decisions
    )
    assert not h.table.slots and current_run() is None and current_deadline() is None


async def test_a_tool_that_clamps_its_wait_reports_its_own_timeout() -> None:
    async def polite(seconds: float) -> str:
        """Wait within the run's deadline.

        Args:
            seconds (float): How long.
        """
        await asyncio.wait_for(asyncio.sleep(seconds), timeout=clamp_timeout(seconds))
        return "slept"

    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.3), [calls(("polite", {"seconds": 5})), text("never said")], [polite],
    )
    _, _, report = await drive(h, agent)
    (result,) = stored_results(agent)
    assert result != cut("polite")  # its own error, not the cut
    assert not any(d.point == "on_acting" for d in report.decisions)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")


async def test_in_a_batch_only_the_call_still_running_is_cut() -> None:
    log: list[str] = []
    ran = Ran()
    tools = shop_tools(ran)
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.4),
        [calls(("search", {"q": "mug"}), ("sleepy", {"seconds": 5})), text("never said")],
        [tools["search"], sleepy_tool(log)],
    )
    _, final, report = await drive(h, agent)
    assert ran == [("search", {"q": "mug"})]
    found, stopped = stored_results(agent)
    assert "3 products for mug: red mug, blue mug, green mug" in found and stopped == cut("sleepy")
    assert [entry.split(":")[0] for entry in report.in_flight] == ["sleepy"]
    assert "red mug" in (final.get_text_content() or "")  # what the run found is still told
    assert report.reason == "deadline"


async def test_a_tool_finishing_within_the_grace_keeps_its_result() -> None:
    ran = Ran()
    tools = shop_tools(ran, delay=0.15)
    h, _, agent = harnessed(HarnessConfig(deadline_s=0.1, wrap_up_s=0), [calls(("search", {"q": "mug"}))],
                            [tools["search"]])
    _, _, report = await drive(h, agent)
    assert ran == [("search", {"q": "mug"})]
    (found,) = stored_results(agent)
    assert "3 products for mug: red mug, blue mug, green mug" in found
    assert report.in_flight == []


async def test_with_deadlines_switched_off_the_tool_runs_to_its_end(monkeypatch: Any) -> None:
    monkeypatch.setenv("HARNESS_DEADLINE_ENABLED", "0")
    log: list[str] = []
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.1), [calls(("sleepy", {"seconds": 0.4})), text("done")], [sleepy_tool(log)],
    )
    _, final, report = await drive(h, agent)
    assert log == ["start", "end"]
    assert final.get_text_content() == "done"
    assert report.terminal_state.value == "completed"

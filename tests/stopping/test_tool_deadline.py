"""The run's deadline bounds its tools: a tool still running
``TOOL_GRACE_S`` after it is cancelled, the model's context says the call
was stopped with its effect unknown, the run ends ``incomplete``
(``deadline``) without another model call, and the report keeps the call in
flight. A tool that honours ``clamp_timeout`` reports its own timeout first."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from hookkit import Ran, drive, harnessed, shop_tools, stored_results
from scripted import calls, text

from agentscope_harness import HarnessConfig, clamp_timeout
from agentscope_harness.adapters.tool_adapter import DEADLINE_CUT, TOOL_GRACE_S
from agentscope_harness.calls import DEADLINE_PASSED
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


def charging(charged: list[float]) -> Any:
    def charge(amount: int) -> str:
        """Charge the card.

        Args:
            amount (int): USD.
        """
        charged.append(time.monotonic())
        return f"charged {amount}"

    return charge


async def test_no_call_of_a_sequential_batch_starts_after_the_cut() -> None:
    from agentscope.tool import FunctionTool
    from scripted import ALLOW

    charged: list[float] = []
    log: list[str] = []
    tools = [FunctionTool(sleepy_tool(log), permission=ALLOW, is_concurrency_safe=False),
             FunctionTool(charging(charged), permission=ALLOW, is_concurrency_safe=False)]
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.3), [calls(("sleepy", {"seconds": 5}), ("charge", {"amount": 99})), text("x")],
        tools,
    )
    _, final, report = await drive(h, agent)
    assert charged == [] and log == ["start", "cancelled"]
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert "charge" not in (final.get_text_content() or "")  # nothing it did is reported as found


async def test_a_call_judged_past_the_deadline_is_not_made() -> None:
    from agentscope_harness import ToolPolicy

    charged: list[float] = []

    async def slow_check(args: dict[str, Any]) -> None:
        await asyncio.sleep(0.5)  # a remote policy check, slower than the run's time

    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.2, tools={"charge": ToolPolicy(ask_when=slow_check)}),
        [calls(("charge", {"amount": 5})), text("never said")], [charging(charged)],
    )
    _, final, report = await drive(h, agent)
    assert charged == []
    assert stored_results(agent) == [format_sentinel("run_concluded", DEADLINE_PASSED.format(name="charge"))]
    assert report.in_flight == []  # not made: its effect is known to be none
    assert report.tool_calls == {}  # nor is it counted as made (red team)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert any(d.point == "pre_tool_call" and d.detail == "deadline: the call to charge was not made"
               for d in report.decisions)


def _slow_cleanup_tool(rolled_back: list[str]) -> Any:
    from agentscope.tool import FunctionTool
    from scripted import ALLOW

    async def slow_cleanup(seconds: float) -> str:
        """Wait, then clean up slowly.

        Args:
            seconds (float): How long.
        """
        try:
            await asyncio.sleep(seconds)
        finally:
            await asyncio.sleep(0.5)  # rolling back a remote transaction
            rolled_back.append("done")
        return "x"

    return FunctionTool(slow_cleanup, permission=ALLOW, is_concurrency_safe=False)


async def test_a_callers_cancellation_before_the_cut_is_the_callers() -> None:
    """The user stops the reply while its tool runs (a deadline set): the
    tool is cancelled as if it ran inline, its rollback is waited for, and
    the run ends ``cancelled``, not ``incomplete`` (``deadline``)."""
    from scripted import run

    rolled_back: list[str] = []
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=5), [calls(("slow_cleanup", {"seconds": 5})), text("never said")],
        [_slow_cleanup_tool(rolled_back)],
    )
    task = asyncio.create_task(run(agent, "hi"))
    await asyncio.sleep(0.2)  # the tool is running; the user presses stop
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    report = h.last_report(agent)
    assert report.terminal_state.value == "cancelled"  # as without a deadline
    assert rolled_back == ["done"]  # waited for, as inline
    assert not h.table.slots


async def test_a_cut_tool_slow_to_stop_finishes_its_rollback_after_the_reply() -> None:
    """Cut at the deadline, a tool whose rollback takes 0.5 s is given
    ``TOOL_GRACE_S`` to stop, then left to finish: the reply ends at once
    (``incomplete``, ``deadline``, the call in flight), and the rollback is
    not cancelled again: it completes in its task."""
    from scripted import run

    rolled_back: list[str] = []
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.2), [calls(("slow_cleanup", {"seconds": 5})), text("never said")],
        [_slow_cleanup_tool(rolled_back)],
    )
    started = asyncio.get_running_loop().time()
    await run(agent, "hi")
    took = asyncio.get_running_loop().time() - started
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert took < 0.6 and rolled_back == []  # not waited for
    assert any(entry.startswith("slow_cleanup:") for entry in report.in_flight)
    await asyncio.sleep(0.6)
    assert rolled_back == ["done"]  # its rollback ran to its end


async def test_a_sub_agent_ends_with_its_own_answer_before_its_tool_is_cut() -> None:
    from agentscope.message import UserMsg
    from scripted import ScriptedModel, make_agent, run

    from agentscope_harness import Harness

    h = Harness(HarnessConfig(deadline_s=0.3), load_entry_points=False)
    log: list[str] = []
    child = make_agent(ScriptedModel([calls(("sleepy", {"seconds": 5})), text("child never")]),
                       [sleepy_tool(log)], h.middlewares(), name="researcher")
    answers: list[str] = []

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to find out.
        """
        msg = await child.reply(UserMsg("lead", task))
        answers.append(msg.get_text_content() or "")
        return answers[-1]

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead never")]),
                      [delegate], h.middlewares(), name="lead")
    await run(lead)
    fallback = HarnessConfig().fallback_text.format(reason="the time allowed for it ran out")
    assert [a.split("\n")[0] for a in answers] == [fallback]  # the child's own answer reached the lead
    child_report, lead_report = h.last_report(child), h.last_report(lead)
    assert (child_report.terminal_state.value, child_report.reason) == ("incomplete", "deadline")
    assert (lead_report.terminal_state.value, lead_report.reason) == ("incomplete", "deadline")
    assert lead_report.in_flight == [] and not h.table.slots


async def test_a_run_resumed_after_its_deadline_gets_the_time_again() -> None:
    """The deadline bounds each reply, not a human's wait: a call approved
    after the first reply's deadline runs, and the run completes."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from scripted import run

    from agentscope_harness import ToolPolicy

    refunded: list[float] = []

    async def refund(amount: float) -> str:
        """Refund an amount.

        Args:
            amount (float): USD.
        """
        await asyncio.sleep(0.01)  # the payment provider's answer
        refunded.append(amount)
        return f"refunded {amount}"

    policy = ToolPolicy(role="mutation", ask_when=lambda args: "refunds need a human")
    h, _, agent = harnessed(HarnessConfig(deadline_s=0.3, tools={"refund": policy}),
                            [calls(("refund", {"amount": 80})), text("Refunded.")], [refund])
    events, _ = await run(agent, "refund me")
    asked = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    await asyncio.sleep(0.5)  # the human answers after the first reply's deadline
    confirmed = UserConfirmResultEvent(
        reply_id=asked.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls],
    )
    _, final = await run(agent, "", confirmed)
    report = h.last_report(agent)
    assert refunded == [80] and final.get_text_content() == "Refunded."
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")


async def test_a_call_parked_beside_a_cut_one_runs_when_approved() -> None:
    """One batch: a call cut at the deadline and a call parked for a human.
    The run parks; the reply resuming it gets its time again, so the
    approved call runs; the cut one stays in flight (its effect unknown)."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from scripted import run

    from agentscope_harness import ToolPolicy

    refunded: list[int] = []

    async def refund(amount: int) -> str:
        """Refund an amount.

        Args:
            amount (int): USD.
        """
        refunded.append(amount)
        return f"refunded {amount}"

    log: list[str] = []
    policy = ToolPolicy(role="mutation", ask_when=lambda args: "refunds need a human")
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.3, tools={"refund": policy}),
        [calls(("sleepy", {"seconds": 5}), ("refund", {"amount": 80})), text("Refunded; the wait was stopped.")],
        [sleepy_tool(log), refund],
    )
    events, _ = await run(agent, "go")
    parked = h.last_report(agent)
    asked = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    assert parked.terminal_state.value == "waiting_input" and log == ["start", "cancelled"]
    confirmed = UserConfirmResultEvent(
        reply_id=asked.reply_id, confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in asked.tool_calls],
    )
    _, final = await run(agent, "", confirmed)
    report = h.last_report(agent)
    assert refunded == [80] and final.get_text_content() == "Refunded; the wait was stopped."
    assert report.terminal_state.value == "completed"
    assert [entry.split(":")[0] for entry in report.in_flight] == ["sleepy"]


async def test_shadow_mode_cuts_at_the_deadline_too_and_says_it_enforced_it() -> None:
    """Shadow mode refuses nothing, but time is not a refusal: the tool is
    cut, and the decision says it was enforced."""
    log: list[str] = []
    h, _, agent = harnessed(
        HarnessConfig(deadline_s=0.3, mode="shadow"), [calls(("sleepy", {"seconds": 5})), text("late")],
        [sleepy_tool(log)],
    )
    started = time.monotonic()
    _, _, report = await drive(h, agent)
    assert time.monotonic() - started < 1.0 and log == ["start", "cancelled"]
    (cut_decision,) = [d for d in report.decisions if d.point == "on_acting"]
    assert cut_decision.enforced is True and cut_decision.code == "deadline"
    assert report.reason == "deadline"


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_finishing_tool_done_within_the_grace_ends_with_its_answer(mode: str) -> None:
    """Red team: a finishing tool that completes just past the deadline
    (within ``TOOL_GRACE_S``) delivered; shadow mode ended the run with the
    deadline's apology instead, where enforce mode keeps the tool's answer."""
    from agentscope_harness import ToolPolicy

    async def submit(answer: str) -> str:
        """Deliver the final answer.

        Args:
            answer (str): The answer.
        """
        await asyncio.sleep(0.35)
        return "delivered"

    h, model, agent = harnessed(
        HarnessConfig(mode=mode, deadline_s=0.3, wrap_up_s=0, tools={"submit": ToolPolicy(role="finish")}),
        [calls(("submit", {"answer": "the red mug"})), text("after")], [submit],
    )
    _, final, report = await drive(h, agent)
    assert final.get_text_content() == "the red mug" and len(model.calls) == 1
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")


@pytest.mark.parametrize(("mode", "max_model_calls"), [("enforce", None), ("shadow", None), ("shadow", 1)])
async def test_a_structured_reply_past_its_deadline_ends_with_the_fallback_at_once(
    mode: str, max_model_calls: int | None,
) -> None:
    """Its narrowed rounds cannot reach the model past the deadline; the
    reply then ends at once with the fallback answer, not after AgentScope's
    iteration cap with its own message. Shadow mode too: time is not a
    refusal, even after a stop shadow mode does not enforce (the call limit,
    found by the red team) was recorded first."""
    from agentscope.message import UserMsg
    from pydantic import BaseModel
    from scripted import ScriptedModel, make_agent

    from agentscope_harness import Harness

    class Verdict(BaseModel):
        answer: str

    class Provider(ScriptedModel):  # a real provider awaits its answer
        async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.02)
            return await super()._call_api(*args, **kwargs)

    def turn(record: dict[str, Any]) -> Any:
        choice = record["tool_choice"]
        if choice is not None and choice.mode == "GenerateStructuredOutput":
            return calls(("GenerateStructuredOutput", {"answer": "the red mug"}))
        asked.append(1)  # two quick rounds, then a call that outlives the deadline
        return calls(("sleepy", {"seconds": 0.02 * len(asked) if len(asked) < 3 else 5}))

    log: list[str] = []
    asked: list[int] = []
    h = Harness(HarnessConfig(deadline_s=0.3, mode=mode, max_model_calls=max_model_calls), load_entry_points=False)
    model = Provider([turn], repeat=True)
    agent = make_agent(model, [sleepy_tool(log)], h.middlewares())
    final = await agent.reply(UserMsg("user", "which mug?"), structured_schema=Verdict)
    report = h.last_report(agent)
    fallback = HarnessConfig().fallback_text.format(reason="the time allowed for it ran out")
    assert (final.get_text_content() or "").startswith(fallback)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert len(report.decisions) < 20  # not a round per iteration up to the cap
    by_time = [
        d for d in report.decisions
        if d.action in ("stop", "fallback", "constrain") and d.detail.startswith(("deadline", "stopped"))
    ]
    assert by_time and all(d.enforced for d in by_time)  # shadow mode too: time is not a refusal

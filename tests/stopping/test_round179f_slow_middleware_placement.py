"""Round 179 (red team s179f): a middleware of yours that waits before
handing a call on.

README (deadlines): a middleware placed after ``harness.middlewares()`` is
inside the guarded model call and the tool's call, and is cut at the
deadline. One placed before them (outside its layers, the order the README
recommends) that waits in ``on_model_call`` or ``on_acting`` is cut by the
reply layer 0.2 s past the deadline (session 42; it held the reply before):
the run ends ``incomplete`` (``deadline``) with the fallback answer, as a cut
inside does, and a call it left unfinished reads so to the model, never as
a user's interruption.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agentscope.agent import ReActConfig
from agentscope.message import Msg, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, RunReport, TerminalState, clamp_timeout
from agentscope_harness.lifecycle import CUT_OUTSIDE_RESULT
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, search, text, tool

pytestmark = pytest.mark.asyncio
DEADLINE_S = 1.0


class SlowToHandOn(MiddlewareBase):
    """Waits ``seconds`` in ``on_model_call`` and ``on_acting`` before
    handing the call on (``clamped``: no longer than the run has left)."""

    def __init__(self, seconds: float, clamped: bool = False, cleanup: float = 0.0) -> None:
        self.seconds = seconds
        self.clamped = clamped
        self.cleanup = cleanup
        """How long it awaits a cleanup once cut."""

    async def _wait(self) -> None:
        try:
            await asyncio.sleep(clamp_timeout(self.seconds) if self.clamped else self.seconds)
        finally:
            if self.cleanup:
                await asyncio.sleep(self.cleanup)

    async def get_middleware_key(self) -> str:
        return f"slow_to_hand_on_{id(self)}"

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        await self._wait()
        return await next_handler(**input_kwargs)

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        await self._wait()
        async for item in next_handler(**input_kwargs):
            yield item


@pytest.mark.parametrize("before, clamped", [
    (False, False),
    (True, True),
    (True, False),
], ids=["after_the_harness", "before_it_bounding_its_wait", "before_the_harness"])
@pytest.mark.parametrize("script", [[text("late")], [calls(("search", {"q": "a"})), text("never")]],
                         ids=["model_call", "tool_call"])
async def test_a_middleware_that_waits_before_handing_on_is_cut_at_the_deadline(
    before: bool, clamped: bool, script: list[Any],
) -> None:
    slow = SlowToHandOn(3.0, clamped)
    took, report, streamed, _ = await _cut(
        lambda h: [slow, *h.middlewares()] if before else [*h.middlewares(), slow], ScriptedModel(script))
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert RAN == []  # the search never ran
    final = streamed[-1]
    assert isinstance(final, Msg) and "late" not in (final.get_text_content() or "")
    assert took < DEADLINE_S + 0.35, f"the user waited {took:.2f} s under a {DEADLINE_S} s deadline"


class SlowToAct(SlowToHandOn):
    """Waits only in ``on_acting``: the model's call is made, its tool call is held."""

    async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        return await next_handler(**input_kwargs)


class WaitsBetweenItems(MiddlewareBase):
    """An ``on_reply`` of yours, placed after the harness's (inside its reply
    layer), that waits ``seconds`` before passing on each event after the first."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def get_middleware_key(self) -> str:
        return f"waits_between_items_{id(self)}"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        first = True
        async for item in next_handler(**input_kwargs):
            if not first:
                await asyncio.sleep(self.seconds)
            first = False
            yield item


async def _cut(middlewares: Any, model: ScriptedModel, *, raise_cancelled: bool = False,
               mode: str = "enforce") -> tuple[float, RunReport, list[Any], Any]:
    """One reply under a 1 s deadline; what it took, its report, what it streamed, and the agent."""
    RAN.clear()
    h = Harness(HarnessConfig(deadline_s=DEADLINE_S, mode=mode), load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), middlewares(h))
    agent.react_config = ReActConfig(max_iters=50, interruption_raise_cancelled_error=raise_cancelled)
    streamed: list[Any] = []
    started = time.monotonic()
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "find a"), yield_final_msg=True):
            streamed.append(item)
    took = time.monotonic() - started
    report = h.last_report(agent)
    assert report is not None
    return took, report, streamed, agent


def _said(streamed: list[Any]) -> str:
    return "".join(getattr(e, "delta", "") for e in streamed if type(e).__name__ == "TextBlockDeltaEvent")


@pytest.mark.parametrize("raise_cancelled", [False, True], ids=["agentscope_default", "raising_cancelled_error"])
async def test_a_tool_call_held_outside_the_harness_is_cut_and_says_so(raise_cancelled: bool) -> None:
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never"), text("Found a.")])
    took, report, streamed, agent = await _cut(lambda h: [SlowToAct(3.0), *h.middlewares()], model,
                                               raise_cancelled=raise_cancelled)
    assert took < DEADLINE_S + 0.5, f"the user waited {took:.2f} s under a {DEADLINE_S} s deadline"
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert RAN == [] and len(model.calls) == 1
    assert any((d.hook, d.point, d.code) == ("liveness_watchdog", "on_reply", "deadline") for d in report.decisions)
    assert [entry.split(":")[0] for entry in report.in_flight] == ["search"]  # whether it ran is not known
    final = streamed[-1]
    assert isinstance(final, Msg) and "time allowed for it ran out" in (final.get_text_content() or "")
    assert "time allowed for it ran out" in _said(streamed)  # the stream says it too
    shown = [e.delta for e in streamed if type(e).__name__ == "ToolResultTextDeltaEvent"]
    assert shown == [CUT_OUTSIDE_RESULT], shown  # nobody interrupted it
    # the next reply's model reads the call's end as a cut, and the answer it was given
    async for _ in agent.reply_stream(UserMsg("user", "and now?")):  # the default principal: no identity tool
        pass
    results = model.calls[-1].tool_results
    assert len(results) == 1 and CUT_OUTSIDE_RESULT in results[0] and "interrupted" not in results[0], results


async def test_a_wait_inside_the_reply_layer_is_cut_at_the_deadline_too() -> None:
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    took, report, streamed, _ = await _cut(lambda h: [*h.middlewares(), WaitsBetweenItems(3.0)], model)
    assert took < DEADLINE_S + 0.5, f"the user waited {took:.2f} s under a {DEADLINE_S} s deadline"
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    final = streamed[-1]
    assert isinstance(final, Msg) and "time allowed for it ran out" in (final.get_text_content() or "")


async def test_shadow_mode_cuts_outside_too() -> None:
    model = ScriptedModel([text("late")])
    took, report, streamed, _ = await _cut(lambda h: [SlowToHandOn(3.0), *h.middlewares()], model, mode="shadow")
    assert took < DEADLINE_S + 0.5
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    cut = [d for d in report.decisions if d.point == "on_reply"]
    assert cut and all(d.enforced for d in cut)  # time is no refusal: enforced in shadow mode too


async def test_waits_each_shorter_than_the_grace_are_cut_by_their_sum() -> None:
    """Red team r180a: the grace was 0.2 s from each step begun past the
    deadline, so waits of 0.1 s between events were never cut."""
    model = ScriptedModel([calls(("search", {"q": str(i)})) for i in range(40)] + [text("never")])
    took, report, streamed, _ = await _cut(lambda h: [*h.middlewares(), WaitsBetweenItems(0.1)], model)
    assert took < DEADLINE_S + 0.5, f"the user waited {took:.2f} s under a {DEADLINE_S} s deadline"
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "time allowed for it ran out" in (streamed[-1].get_text_content() or "")


@pytest.mark.parametrize("raise_cancelled", [False, True], ids=["agentscope_default", "raising_cancelled_error"])
async def test_the_callers_cancellation_during_the_cut_ends_the_run_cancelled(raise_cancelled: bool) -> None:
    """README: "A caller's own cancellation during a cut still ends the run
    `cancelled`" (red team r180a: it ended ``deadline``)."""
    RAN.clear()
    h = Harness(HarnessConfig(deadline_s=DEADLINE_S), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), [SlowToAct(5.0, cleanup=1.0), *h.middlewares()])
    agent.react_config = ReActConfig(max_iters=50, interruption_raise_cancelled_error=raise_cancelled)

    async def drive() -> None:
        with h.acting_for(ALICE):
            async for _ in agent.reply_stream(UserMsg("user", "find a")):
                pass

    task = asyncio.create_task(drive())
    await asyncio.sleep(DEADLINE_S + 0.5)  # cut at 1.2 s; the cleanup runs to 2.2 s
    task.cancel()
    raised = False
    try:
        await asyncio.wait_for(asyncio.shield(task), 3)
    except asyncio.CancelledError:
        raised = True
    report = h.last_report(agent)
    assert report is not None and report.terminal_state == TerminalState.CANCELLED, (report and report.reason)
    assert raised == raise_cancelled  # AgentScope's default takes a cancellation, as without the harness


async def test_a_wait_bounded_by_clamp_timeout_ends_the_run_at_its_deadline_not_failed() -> None:
    """README: a middleware before the harness's that may wait long "should
    still bound its wait with `clamp_timeout` (it then reports its own error
    at the deadline)": the run ends ``deadline`` with the fallback answer (red
    team s180b: its ``TimeoutError`` after a tool round was taken for the
    provider's failure, ``failed`` (``model_error``), and raised to the caller)."""
    class ClampedAfterFirst(SlowToAct):
        """The first model call passes; the next waits, bounded by the deadline."""

        async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            if self.seconds:
                self.seconds = 0
                return await next_handler(**input_kwargs)
            await asyncio.wait_for(asyncio.sleep(30.0), clamp_timeout(30.0))  # a network call: TimeoutError
            return await next_handler(**input_kwargs)

        async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            async for item in next_handler(**input_kwargs):
                yield item

    model = ScriptedModel([calls(("search", {"q": "a"})), text("never")])
    took, report, streamed, _ = await _cut(lambda h: [ClampedAfterFirst(1, clamped=True), *h.middlewares()], model)
    assert took < DEADLINE_S + 0.5
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert RAN == ["a"] and len(model.calls) == 1
    assert "time allowed for it ran out" in (streamed[-1].get_text_content() or "")
    assert "What I found" in (streamed[-1].get_text_content() or "")


async def _lead_and_sub(held: MiddlewareBase, raise_cancelled: bool = False) -> tuple[float, Any, Any, Msg]:
    """A lead whose one tool asks a sub-agent (same Harness, 1 s deadline),
    whose middleware ``held``, before its harness's, holds it: what the lead's
    reply took, both agents' last reports, and the lead's final message."""
    RAN.clear()
    h = Harness(HarnessConfig(deadline_s=DEADLINE_S), load_entry_points=False, environ={})
    setting = ReActConfig(max_iters=50, interruption_raise_cancelled_error=raise_cancelled)
    sub = make_agent(ScriptedModel([text("sub never")]), h.instrument(Toolkit(tools=[tool(search)])),
                     [held, *h.middlewares()], name="researcher")
    sub.react_config = setting

    async def research(topic: str) -> str:
        """Ask the researcher.

        Args:
            topic (str): What to research.
        """
        msg = await sub.reply(UserMsg("lead", topic))
        return msg.get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("research", {"topic": "kettles"})), text("never")]),
                      h.instrument(Toolkit(tools=[tool(research)])), h.middlewares())
    lead.react_config = setting
    started = time.monotonic()
    with h.acting_for(ALICE):
        final = await lead.reply(UserMsg("user", "find kettles"))
    took = time.monotonic() - started
    await asyncio.sleep(0.4)  # a cleanup the sub-agent's middleware still awaits
    return took, h.last_report(lead), h.last_report(sub), final


def _both_ended_at_the_deadline(report: Any, sub_report: Any) -> None:
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert sub_report is not None and (sub_report.terminal_state, sub_report.reason) == (
        TerminalState.INCOMPLETE, "deadline"), sub_report and sub_report.reason


@pytest.mark.parametrize("raise_cancelled", [False, True], ids=["agentscope_default", "raising_cancelled_error"])
async def test_a_sub_agent_held_outside_its_harness_ends_at_its_own_deadline_first(raise_cancelled: bool) -> None:
    """README: a call running a sub-agent ends "with its own answer first at
    any depth" (red team s180b: the lead's cut of the call came before the
    sub-agent's outside cut, and the sub-agent's run ended ``cancelled``,
    ``interrupted``): a sub-agent's grace is a quarter of its lead's. The
    sub-agent's held step begins inside the tool's first step, in the lead's
    task, and goes on in the tool's own: the cut follows it there (it
    cancelled the lead's task, whose reply then raised ``CancelledError``)."""
    took, report, sub_report, final = await _lead_and_sub(SlowToHandOn(5.0), raise_cancelled)
    assert took < DEADLINE_S + 0.5
    _both_ended_at_the_deadline(report, sub_report)
    assert any(d.point == "on_reply" for d in sub_report.decisions)
    assert "time allowed for it ran out" in (final.get_text_content() or "")


async def test_a_sub_agent_cut_outside_then_by_its_lead_ends_deadline_not_cancelled() -> None:
    """Red team r180d: the sub-agent's own cut came first, its middleware's
    cleanup then held it past the lead's cut of the call running it, and that
    second cancellation (the lead's deadline's, not a caller's) ended the
    sub-agent ``cancelled`` (``interrupted``)."""
    _, report, sub_report, _ = await _lead_and_sub(SlowToHandOn(5.0, cleanup=0.3))
    _both_ended_at_the_deadline(report, sub_report)

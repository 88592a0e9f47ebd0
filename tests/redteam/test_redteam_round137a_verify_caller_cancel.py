"""Round 137 a: round 136 a's verify ``CancelledError`` handling
(hooks/termination.py ``_unchecked`` re-raises only when ``being_cancelled()``).

README hook 19 / round 135-136: a ``verify`` that raises (a cancelled lookup's error
too) is a failed check the model reads (``verification_failed``, "could not be
checked"); the run's own cancellation is not the check's: it cancels (README "What the
caller receives": cancelled / interrupted -> ``cancelled``).
"""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


def harness_with(verify: Any, **kw: Any) -> Harness:
    return Harness(HarnessConfig(max_enforce_retries=0, tools={"submit_answer": ToolPolicy(role="finish", verify=verify)},
                                 **kw), load_entry_points=False, environ={})


def submit_tool(delivered: list[str]) -> Any:
    async def submit_answer(answer: str) -> str:
        """Deliver the answer to the user.

        Args:
            answer (str): The answer.
        """
        delivered.append(answer)
        return answer
    return submit_answer


async def test_caller_cancelling_during_verify_cancels() -> None:
    """Control: the caller cancels the reply's task while an async ``verify`` waits."""
    delivered: list[str] = []
    started = asyncio.Event()

    async def check(result: str) -> str | None:
        started.set()
        await asyncio.sleep(30)
        return None

    h = harness_with(check, hook_timeout_s=60)
    model = ScriptedModel([calls(("submit_answer", {"answer": "42"})), text("The answer is 42."), text("x")])
    agent = make_agent(model, [submit_tool(delivered)], h.middlewares())
    task = asyncio.ensure_future(run(agent, "what is the answer?"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    try:
        await asyncio.wait_for(task, 10)
    except asyncio.CancelledError:
        pass
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.CANCELLED, (report.terminal_state, report.reason)
    assert not any(d.code == "verification_failed" for d in report.decisions)


async def test_a_cancelled_lookup_in_verify_after_an_earlier_interrupted_reply_in_the_same_task() -> None:
    """Attack: the caller's chat loop runs replies one after another in one task. The
    first reply is interrupted (the task is cancelled; AgentScope handles the
    interruption and swallows the ``CancelledError``, by default, without
    ``Task.uncancel()``, so the task's ``cancelling()`` stays 1). The next reply's
    finishing call has a ``verify`` that awaits a shared lookup another request cancelled
    (round 136 a's own case).

    Happened: ``being_cancelled()`` reads the stale ``cancelling()`` count as the run's
    own cancellation: the check's ``CancelledError`` is re-raised, the second reply is
    "interrupted" (``cancelled``) although nobody cancelled it. Should: a failed check
    the model reads, as in a fresh task (``verification_failed``)."""
    delivered: list[str] = []
    started = asyncio.Event()
    first_reply = {"done": False}

    async def check(result: str) -> str | None:
        if not first_reply["done"]:
            started.set()
            await asyncio.sleep(30)
            return None
        shared = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        shared.cancel()  # another caller cancelled the shared lookup
        return await shared

    h = harness_with(check, hook_timeout_s=5)
    model = ScriptedModel([calls(("submit_answer", {"answer": "41"})),
                           calls(("submit_answer", {"answer": "42"})), text("The answer is 42."), text("x")])
    agent = make_agent(model, [submit_tool(delivered)], h.middlewares())

    async def chat_loop() -> Any:
        await run(agent, "first question")  # interrupted below
        first_reply["done"] = True
        return await run(agent, "second question")

    task = asyncio.ensure_future(chat_loop())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()  # the user interrupts the first reply
    await asyncio.wait_for(task, 20)
    first = h.reports[0] if hasattr(h, "reports") else None
    report = h.last_report(agent)
    assert first is not None and first.terminal_state is TerminalState.CANCELLED, first  # the interruption
    told = model.calls[-1].last_result if len(model.calls) > 2 else None
    assert report.terminal_state is TerminalState.INCOMPLETE, (report.terminal_state, report.reason, told)
    assert [d.code for d in report.decisions if d.hook == "mark_terminal"] == ["verification_failed"]

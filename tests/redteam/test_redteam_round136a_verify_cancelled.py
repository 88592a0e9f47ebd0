"""Round 136a: a finishing tool's ``verify`` that raises ``CancelledError`` (it read a
future another part of the app cancelled: ``Future.result()`` of a cancelled cached
lookup, or an awaited shared task that was cancelled).

README hook 19 (mark_terminal): "a `verify` that raises or runs past 80% of the hook's
bound ... is a failed check: 'the result could not be checked', not delivered".

Attack: verify raises ``CancelledError`` (a ``BaseException``) while the run itself is not
being cancelled. ``mark_terminal`` catches only ``Exception``; the runner calls it the
hook's own failure and, the hook being an observer, fails open.
What happened: the model read its finishing call as a plain success (no
verification_failed), exactly the round-135 failure. Should: a failed check.
"""
from __future__ import annotations

import asyncio

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("how", ["sync_cancelled_future", "async_awaits_cancelled_task"])
async def test_a_verify_that_raises_cancelled_error_is_a_failed_check(how: str) -> None:
    delivered: list[str] = []

    async def submit_answer(answer: str) -> str:
        """Deliver the answer to the user.

        Args:
            answer (str): The answer.
        """
        delivered.append(answer)
        return answer

    def check_now(result: str) -> str | None:
        lookup = asyncio.get_running_loop().create_future()  # the app's cached lookup of the order
        lookup.cancel()  # another request cancelled it
        return lookup.result()  # raises asyncio.CancelledError

    async def check_later(result: str) -> str | None:
        shared = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        shared.cancel()  # another caller cancelled the shared lookup
        return await shared  # raises asyncio.CancelledError, the run is not being cancelled

    verify = check_now if how.startswith("sync") else check_later
    h = Harness(HarnessConfig(hook_timeout_s=2.0, max_enforce_retries=0,
                              tools={"submit_answer": ToolPolicy(role="finish", verify=verify)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_answer", {"answer": "42"})), text("The answer is 42."), text("x")])
    agent = make_agent(model, [submit_answer], h.middlewares())
    await run(agent, "what is the answer?")
    report = h.last_report(agent)
    told = model.calls[1].last_result
    assert delivered == ["42"]
    assert "[harness:verification_failed]" in told, f"the model read {told!r}"
    assert "could not be checked" in told, told
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert [d.code for d in report.decisions if d.hook == "mark_terminal"] == ["verification_failed"]

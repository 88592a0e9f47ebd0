"""Round 135 b (tell the model and the user the truth): a finishing tool's ``verify``
that raises (the service it reads is down) or runs past ``hook_timeout_s``.

README hook 19 (mark_terminal): "a failed verification becomes an error
(`verification_failed`)". A check that could not run is a failed check: the result
is not delivered (fail closed, as `ask_when` and an approval's `when` do).

What happened: `mark_terminal` is an observer, so the failure was only logged: the
run was not completed, but the model read each finishing result as a plain success
(it was never told its answer was not accepted) and was then told to "call
submit_answer" although it just had. Should: the model reads a `verification_failed`
error saying the result could not be checked, the report records it.
"""
from __future__ import annotations

import asyncio

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("failure", ["control-says-missing", "raises", "times_out", "raises_synchronously",
                                     "sync_cancelled_future", "async_awaits_cancelled_task"])
async def test_a_verifier_that_cannot_run_is_a_failed_check_the_model_reads(failure: str) -> None:
    delivered: list[str] = []

    async def submit_answer(answer: str) -> str:
        """Deliver the answer to the user.

        Args:
            answer (str): The answer.
        """
        delivered.append(answer)
        return answer

    async def check(result: str) -> str | None:
        if failure == "raises":
            raise RuntimeError("the order service the checker reads is down")
        if failure == "times_out":
            await asyncio.sleep(30)
        return "It does not cite an order."

    def check_now(result: str) -> str | None:
        if failure == "sync_cancelled_future":
            lookup = asyncio.get_running_loop().create_future()  # the app's cached lookup of the order
            lookup.cancel()  # another request cancelled it
            return lookup.result()  # raises asyncio.CancelledError
        raise RuntimeError("the order service the checker reads is down")

    async def check_shared(result: str) -> str | None:
        shared = asyncio.ensure_future(asyncio.sleep(10))
        await asyncio.sleep(0)
        shared.cancel()  # another caller cancelled the shared lookup
        return await shared  # raises asyncio.CancelledError, the run is not being cancelled

    verify = (check_now if failure in ("raises_synchronously", "sync_cancelled_future")
              else check_shared if failure == "async_awaits_cancelled_task" else check)
    h = Harness(HarnessConfig(hook_timeout_s=0.3, max_enforce_retries=0,
                              tools={"submit_answer": ToolPolicy(role="finish", verify=verify)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_answer", {"answer": "42"})), text("The answer is 42."), text("x")])
    agent = make_agent(model, [submit_answer], h.middlewares())
    await run(agent, "what is the answer?")
    report = h.last_report(agent)
    told = model.calls[1].last_result  # what the model read of its finishing call
    assert delivered == ["42"]  # it ran
    assert report.terminal_state is TerminalState.INCOMPLETE  # not delivered
    assert "[harness:verification_failed]" in told, f"the model read {told!r}"
    said = "does not cite an order" if failure.startswith("control") else "could not be checked"
    assert said in told, told
    assert [d.code for d in report.decisions if d.hook == "mark_terminal"] == ["verification_failed"]

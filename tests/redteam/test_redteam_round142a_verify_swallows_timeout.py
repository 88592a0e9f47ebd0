"""Round 142 a: a finishing tool's async `verify` that runs past its bound but answers
"nothing missing" once cancelled passes the check (Python 3.11's `asyncio.wait_for`
returns a result the cancelled coroutine returned).

README hook 19 (mark_terminal): "a `verify` that raises or runs past 80% of the hook's
bound, `hook_timeout_s` or the deadline, is a failed check: 'the result could not be
checked', not delivered". The runner treats the same shape in a hook as a failure
("the hook caught the timeout's cancellation and returned: it failed",
`Runner.bounded`).

Attack: `verify` awaits a slow order service (30 s) with `hook_timeout_s=0.3`; its
client, as many do, turns any interruption into "could not check, don't block"
(returns `None`). `_verified_later` uses `asyncio.wait_for(pending, 0.24)`: at the
bound the coroutine is cancelled, returns `None`, and wait_for (3.11) hands back that
`None`: the run completes and the answer is delivered as verified.
Should: a failed check ("could not be checked"), `verification_failed`, not delivered.
"""
from __future__ import annotations

import asyncio

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


async def test_a_verify_that_swallows_its_timeout_is_a_failed_check() -> None:
    async def submit_answer(answer: str) -> str:
        """Deliver the answer to the user.

        Args:
            answer (str): The answer.
        """
        return answer

    async def check(result: str) -> str | None:
        try:
            await asyncio.sleep(30)  # the order service
            return "It does not cite an order."
        except BaseException:  # the client's own "could not reach the service": do not block
            return None

    h = Harness(HarnessConfig(hook_timeout_s=0.3, max_enforce_retries=0,
                              tools={"submit_answer": ToolPolicy(role="finish", verify=check)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit_answer", {"answer": "42"})), text("The answer is 42."), text("x")])
    agent = make_agent(model, [submit_answer], h.middlewares())
    _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    codes = [d.code for d in report.decisions if d.hook == "mark_terminal"]
    assert report.terminal_state is TerminalState.INCOMPLETE and codes == ["verification_failed"], (
        f"a check cut at its bound delivered: {report.terminal_state.value}/{report.reason}, "
        f"mark_terminal={codes}, answer={final.get_text_content()!r}")

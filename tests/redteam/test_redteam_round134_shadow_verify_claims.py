"""Round 134b d (weaker). Round 133 keeps a finishing call's success in shadow mode when
its ``verify`` fails (README: "A finishing call whose ``verify`` fails keeps its own
success there"). But ``CallFlow`` then records it as a success everywhere
(``record_outcome(ok=True)``, ``_keep_finding``, ``tell_enclosing_runs(confirmed=True)``),
so the final-answer audit backs the model's "I submitted the answer" with it: the shadow
report lists no unsupported claim where the enforcing run's report lists ``submit``.

Promise (README Security, Shadow mode): "the report ends as enforcing would have ended the
run ... its decisions marked ``enforced=False``" (shadow is there to show what enforcing
would do). At 5e85daa both reports list ``['submit']``.
Attack: ``submit`` (role finish, claims ``submitted the answer``) runs, verify fails, the
model answers "I submitted the answer ...".
Fix (calls.CallFlow after post_tool_call): in shadow mode, a ``verification_failed``
decision should count the call as not delivered for the run's facts (claims,
``record_outcome``, enclosing runs) while the result the model/UI sees keeps its success.
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio


async def submit(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    return "delivered: " + answer


async def _report(mode: str):
    model = ScriptedModel([calls(("submit", {"answer": "Order A-1 total 30 USD"})),
                           *[text("I submitted the answer: Order A-1 total 30 USD.")] * 6])
    h = Harness(HarnessConfig(mode=mode, tools={"submit": ToolPolicy(
        role="finish", claims=[r"\bsubmitted the answer\b"], verify=lambda out: "the answer lacks the delivery date")}),
        load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit)])), h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "total of A-1?")
    return h.last_report(agent)


async def test_shadow_report_lists_the_claim_enforcing_lists() -> None:
    enforced = await _report("enforce")
    shadow = await _report("shadow")
    assert enforced.unsupported_claims == ["submit"]
    assert shadow.unsupported_claims == enforced.unsupported_claims, (
        f"shadow: {shadow.unsupported_claims} {shadow.terminal_state}; enforce: {enforced.unsupported_claims}")

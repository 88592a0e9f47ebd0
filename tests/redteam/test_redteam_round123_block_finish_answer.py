"""Round 123 (personal data). `HarnessConfig.pii` `block` withholds a final answer that carries a blocked
kind (README, What the caller receives: "the final answer carries personal data
a `HarnessConfig.pii` kind `block`s ... | `incomplete` (`audit_failed`) | "I'm
sorry, I could not produce an answer I can stand behind..." : the answer is
withheld"; final_answer_audit: "applies `HarnessConfig.pii` ... a failure
withholds the answer"). A text answer is withheld (control). The finishing
tool's answer -- "the finishing tool's answer, audited" -- with the same email
is delivered `completed` (`finished`), the blocked value merely redacted: `block`
silently becomes `redact`. Cause: agent_adapter._said runs the answer filter
over the finishing tool's answer and drops its PiiOutcome (blocked_kinds); the
audit then reads "[pii:email]" and finds nothing blocked.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

EMAIL = "alice.w@example.com"
WITHHELD = "I'm sorry, I could not produce an answer I can stand behind."


async def submit(answer: str) -> str:
    """Submit the final answer.

    Args:
        answer (str): The answer.
    """
    return "submitted"


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return "found"


async def test_control_a_text_answer_with_a_blocked_kind_is_withheld() -> None:
    h = Harness(HarnessConfig(pii={"email": "block"}), load_entry_points=False, environ={})
    model = ScriptedModel([text(f"Write to {EMAIL}.")])
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "who do I write to?")
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "audit_failed")
    assert final.get_text_content().startswith(WITHHELD)


async def test_a_finishing_answer_with_a_blocked_kind_is_withheld() -> None:
    h = Harness(HarnessConfig(pii={"email": "block"}, tools={"submit": ToolPolicy(role="finish")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("submit", {"answer": f"Write to {EMAIL}."})), text("unused")])
    agent = make_agent(model, [submit], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "who do I write to?")
    report = h.last_report(agent)
    answer = final.get_text_content()
    assert (report.terminal_state.value, report.reason) == ("incomplete", "audit_failed"), (
        report.terminal_state.value, report.reason, answer)
    assert answer.startswith(WITHHELD), answer

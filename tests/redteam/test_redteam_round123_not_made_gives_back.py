"""Round 123 (red team on round 122). Round 123 red team: round 122 refuses a finishing call whose arguments are too deep to
redact (``HarnessToolAdapter._not_made``, ``policy_error``): "neither running nor counted
as made ... its slots given back" (``_uncount``: ``called_tools``, ``in_flight``, the
fleet's slots). But the charge ``spend_gate`` made at admission -- one call on
``max_tool_calls`` (``RunState.add_tool_call``) and the tool's ``units`` on its ledgers --
is never refunded. The report says no call was made (``tool_calls == {}``) while the run's
cap reads "used up (1/1)": the model's corrected delivery (the document flattened) is
refused ``quota_exhausted`` and the user gets no answer.

README hook 9 spend_gate: "`units` on the tool's ledgers and one call on `max_tool_calls`,
charged at admission; ... (a call refused after them or parked gives its unit and slot
back)"; README limits: "a finishing tool's arguments too deep for the harness to redact are
refused, `policy_error`".
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio


def nested(depth: int) -> Any:
    doc: Any = "leaf"
    for _ in range(depth):
        doc = {"c": doc}
    return doc


DELIVERED: list[str] = []


async def deliver(answer: str, doc: dict) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
        doc (dict): The document attached.
    """
    DELIVERED.append(answer)
    return "delivered"


CONFIGS = {
    "max_tool_calls": HarnessConfig(max_tool_calls=1, tools={"deliver": ToolPolicy(role="finish")}),
    "ledger": HarnessConfig(ledgers={"deliveries": Ledger(1)},
                            tools={"deliver": ToolPolicy(role="finish", ledgers=["deliveries"], units=1)}),
}


@pytest.mark.parametrize("cap", list(CONFIGS))
async def test_a_call_not_made_gives_its_charge_back(cap: str) -> None:
    DELIVERED.clear()
    h = Harness(CONFIGS[cap], load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("deliver", {"answer": "Your report is ready.", "doc": nested(350)})),  # not made: policy_error
        calls(("deliver", {"answer": "Your report is ready.", "doc": {"c": "leaf"}})),  # flattened
        text("Your report is ready."), text("Your report is ready."),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(deliver)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "prepare my report")
    report = h.last_report(agent)
    told = [m for c in model.calls for m in tool_messages(c)]
    assert "policy_error" in told[0]  # the first was not made, and the report counts none
    assert DELIVERED == ["Your report is ready."], (
        f"the one delivery made was refused: {told[-1]!r}; report tool_calls={report.tool_calls} "
        f"{report.terminal_state.value}/{report.reason}")

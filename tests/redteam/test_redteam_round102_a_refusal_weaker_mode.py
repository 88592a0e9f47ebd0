"""Red team, round 102 (a): ``outputs.quoted_pii`` merges the modes as
``{**HarnessConfig.pii, **ToolPolicy.pii}``: for a kind both name, the
tool's mode wins, even when it is weaker. ``HarnessConfig.pii = {"ssn":
"redact"}`` (README: the modes "for the final answer and the model's
streamed text, thinking and tool-call arguments") shows the model's
arguments as ``[pii:ssn]``; the tool's ``pii = {"ssn": "mask"}`` (what the
model reads of its results) then rewrites AgentScope's refusal of those very
arguments, streamed to the user right after them, as ``***-**-1120``: the
last four digits the streamed arguments withheld.

Real ``Agent``, real tool in a real ``Toolkit``."""

from __future__ import annotations

from agentscope.event import ToolCallDeltaEvent, ToolResultTextDeltaEvent
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

SSN = "078-05-1120"


async def refund(amount: int) -> str:
    """Refund.

    Args:
        amount (int): Cents.
    """
    return "refunded"


async def test_a_refusal_streams_no_more_of_an_ssn_than_the_streamed_arguments() -> None:
    config = HarnessConfig(pii={"ssn": "redact"}, tools={"refund": ToolPolicy(pii={"ssn": "mask"})})
    h = Harness(config, load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"amount": SSN})), text("Sorry.")], stream=True)
    agent = make_agent(model, [refund], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund me")
    args = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    assert "1120" not in args and "[pii:ssn]" in args  # HarnessConfig.pii: the streamed arguments
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert "Input validation failed" in shown
    assert "1120" not in shown, f"the refusal streamed what the arguments withheld: {shown!r}"

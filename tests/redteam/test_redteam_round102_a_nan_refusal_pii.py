"""Red team, round 102 (a): round 101 rewrites AgentScope's refusal of a
call's arguments with ``quoted_pii`` in the user's stream
(``arguments.refusal_shown``) and in the model's copy, but recognises the
refusal by its opening words (``arguments._REFUSALS``). AgentScope has one
more: arguments carrying ``NaN`` or ``Infinity`` (Python's JSON reader takes
them) are refused by ``_json_loads_with_repair`` with "Error: NaN and
Infinity are not valid JSON numbers.", followed by the whole argument string
(``your_tool_arguments = '{"email": "bob.smith@example.com", ...}'``). It is
not in the list, so the email the streamed arguments showed as
``[pii:email]`` streams to the user whole (and the model's copy is not
rewritten either). CHANGELOG round 101: such refusals "are rewritten with
``HarnessConfig.pii`` and the tool's ``pii``".

Real ``Agent``, real tool in a real ``Toolkit``."""

from __future__ import annotations

from agentscope.event import ToolCallDeltaEvent, ToolResultTextDeltaEvent
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

EMAIL = "bob.smith@example.com"


async def refund(email: str, amount: float) -> str:
    """Refund a customer.

    Args:
        email (str): The customer.
        amount (float): How much.
    """
    return "refunded"


async def test_an_email_in_arguments_refused_for_nan_never_streams_to_the_user() -> None:
    config = HarnessConfig(pii={"email": "redact"}, tools={"refund": ToolPolicy(pii={"email": "redact"})})
    h = Harness(config, load_entry_points=False)
    model = ScriptedModel([calls(("refund", f'{{"email": "{EMAIL}", "amount": NaN}}')), text("Sorry.")], stream=True)
    agent = make_agent(model, [refund], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund bob")
    args = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    assert EMAIL not in args and "[pii:email]" in args  # the streamed arguments: rewritten
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert "NaN and Infinity" in shown  # AgentScope's refusal
    assert EMAIL not in shown, f"the refusal streamed the email to the user: {shown!r}"

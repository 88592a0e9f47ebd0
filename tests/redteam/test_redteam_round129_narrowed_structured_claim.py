"""Round 129 a (tell the user the truth): a stopped run that owes a structured
output gets a round narrowed to `GenerateStructuredOutput`; the MODEL writes
that output ("order A-1 was cancelled", no cancel ever ran), and it is
delivered, unaudited, with `unsupported_claims == []`.

README hook 24: "records unsupported `claims`: the text or a structured
output's strings assert an action whose tool succeeded neither in the run ..."
-> "a structured output withheld"; "An answer the harness gives in the model's
place (a stop's text, the fallback and what the run found) is ... not read for
claims": the structured output is the model's, not the harness's.

Cause: `safety.audit_answer` returns before `_audit_claims` when
`text == run.harness_answer`; in a narrowed round the reply's text IS the
harness's (`answer_owed`), so the model's structured strings, audited in
`_audit_claims(ctx, [cleaned, *_structured_strings(ctx.agent)])`, are skipped
with it. (Its `pii` is filtered apart, `_filter_structured`: that holds.)
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolCallDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from pydantic import BaseModel

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

pytestmark = pytest.mark.asyncio

CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"
CANCELLED: list[str] = []


class Outcome(BaseModel):
    """What was done."""

    summary: str


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    CANCELLED.append(order_id)
    return f"order {order_id} cancelled"


async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return f"result for {q}"


async def test_narrowed_structured_output_claim_is_audited() -> None:
    CANCELLED.clear()
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[CLAIM]),
                                     "lookup": ToolPolicy(role="lookup")}, max_model_calls=2),
                load_entry_points=False, environ={})
    script = [calls(("lookup", {"q": "a"})), calls(("lookup", {"q": "b"})),
              calls(("GenerateStructuredOutput", {"summary": "order A-1 was cancelled"})),
              calls(("GenerateStructuredOutput", {"summary": "order A-1 was cancelled"})), text("ok")]
    model = ScriptedModel(script)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order), tool(lookup)])),
                       middlewares=h.middlewares())
    items = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "cancel A-1"), structured_schema=Outcome,
                                             yield_final_msg=True):
            items.append(item)
    final = items[-1]
    assert isinstance(final, Msg)
    report = h.last_report(agent)
    shown_args = "".join(e.delta for e in items if isinstance(e, ToolCallDeltaEvent))
    assert "order A-1 was cancelled" in shown_args  # the model wrote it into the output
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert CANCELLED == []  # no cancel ran
    # the user must not receive a structured output claiming the cancel, and the report must name it
    assert "cancelled" not in str(final.structured_output or ""), final.structured_output
    assert report.unsupported_claims == ["cancel_order"]


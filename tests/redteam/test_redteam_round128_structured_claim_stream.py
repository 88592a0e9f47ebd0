"""Round 128 d (tell the user the truth): a structured output that claims a
cancel never made is shown whole in the stream, and its correction never
follows there.

README hook 24 (`final_answer_audit`): an unsupported claim in "the text or a
structured output's strings" -> "the answer is then corrected before delivery, a
structured output withheld, and the correction follows the answer in the
stream"; "What a streaming UI shows tells the same story"; "An answer the audit
corrects (`claims`) or withholds is followed in the stream by what replaced
it, as a new text block".

Attack: a reply owing a structured output (`structured_schema`); the model's
only turn is `GenerateStructuredOutput({"summary": "order A-1 was cancelled"})`;
`cancel_order` never ran. Streamed model.

What happened: the final `Msg` is right (the correction, no structured output,
`incomplete`/`unsupported_claim`), but the stream showed the output's arguments
("order A-1 was cancelled") and then only AgentScope's "Structured output
generated successfully." result: no text block with the correction follows
(`ReplyLifecycle.session_end` emits corrections only when `run.candidate` or
`answer_owed` is set, neither is for a plain structured reply). A streaming
UI's last word is the made-up cancel. (The same correction does follow for a
finishing tool's answer and for a text answer.)

Should: the correction follows in the stream as a text block, as it does for
text and finishing-tool answers.
"""
from __future__ import annotations

import pytest
from agentscope.event import TextBlockDeltaEvent, ToolCallDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from pydantic import BaseModel

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

pytestmark = pytest.mark.asyncio

CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"


class Outcome(BaseModel):
    """What was done."""

    summary: str


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    raise AssertionError("never called")


async def test_a_withheld_structured_claim_is_followed_by_its_correction_in_the_stream() -> None:
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[CLAIM])}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("GenerateStructuredOutput", {"summary": "order A-1 was cancelled"})), text("ok")],
                          stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order)])), middlewares=h.middlewares())
    items = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "cancel A-1"), structured_schema=Outcome,
                                             yield_final_msg=True):
            items.append(item)
    final = items[-1]
    assert isinstance(final, Msg)
    report = h.last_report(agent)
    shown_args = "".join(e.delta for e in items if isinstance(e, ToolCallDeltaEvent))
    shown_text = "".join(e.delta for e in items if isinstance(e, TextBlockDeltaEvent))

    # the final message and the report are right
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")
    assert "has not been done" in (final.get_text_content() or "")
    # the stream showed the made-up cancel ...
    assert "order A-1 was cancelled" in shown_args
    # ... so what replaced it must follow it there
    assert "has not been done" in shown_text, (shown_text, shown_args)

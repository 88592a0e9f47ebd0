"""Round 137 b (scenarios, README "The hooks" row 1): a sub-agent whose toolkit has no
finishing tool of its own is not held to it ("What the caller receives": it answers its
lead in text), yet its model was told "Deliver the result by calling submit; a plain text
answer does not complete the task": a tool it does not have, a rule that does not hold for
it (a real model may call a tool that does not exist, or refuse to answer in text). The
lead, which has `submit`, is still told.
"""
from __future__ import annotations

from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


async def submit(answer: str) -> str:
    """Deliver the answer.

    Args:
        answer (str): The answer.
    """
    return "delivered"


def _system(model: ScriptedModel) -> str:
    return str(model.calls[0].formatted[0]["content"])


async def test_a_sub_agent_without_the_finishing_tool_is_not_told_to_call_it() -> None:
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False, environ={})
    child_model = ScriptedModel([text("A-1 is paid.")])
    child = make_agent(child_model, h.instrument(Toolkit(tools=[tool(lookup_order)])), h.middlewares(),
                       name="researcher")

    async def ask_researcher(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead_model = ScriptedModel([calls(("ask_researcher", {"task": "is A-1 paid"})),
                                calls(("submit", {"answer": "A-1 is paid"}))])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(ask_researcher), tool(submit)])), h.middlewares())
    _, msg = await run(lead, "is A-1 paid?")
    assert msg.get_text_content() == "A-1 is paid"
    assert h.last_report(child).terminal_state is TerminalState.COMPLETED  # not held to it
    assert "Deliver the result by calling submit" in _system(lead_model)  # the control: the lead is told
    told = _system(child_model)
    assert "submit" not in told and "# Harness rules" in told, f"the sub-agent was told: {told[-300:]!r}"

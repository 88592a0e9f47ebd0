"""A sub-agent called from inside a parent's tool, offline.

The parent ("concierge") delegates a question to a specialist agent from
inside one of its tools. Both agents use the same Harness, so the child run is
nested in the parent's: it shares the parent's deadline, cost budget, ledgers
and tool-call cap (it cannot reset them), its cost is charged to the parent as
well, and its report shows up in the parent's ``report.children``.

    python examples/sub_agent.py
"""

import asyncio

from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    Principal,
    ToolPolicy,
    remaining_time,
)
from agentscope_harness.testing import ScriptedModel, calls, text

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

harness = Harness(HarnessConfig(
    tools={
        "search_reviews": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
        "ask_specialist": ToolPolicy(role="other"),
    },
    ledgers={"retrieval": Ledger(cap=4)},  # shared: the child's searches count too
    cost=CostPolicy(cap_usd=0.10, prices={"concierge-model": (2.5, 10.0),
                                          "specialist-model": (0.15, 0.6)}),
    deadline_s=30,
))
seen_deadlines: list[float] = []


async def search_reviews(product: str) -> str:
    """Search product reviews.

    Args:
        product (str): The product to find reviews for.
    """
    return f"{product}: 4.6/5 over 1,203 reviews; praised for battery life."


async def ask_specialist(question: str) -> str:
    """Ask the audio specialist agent a question.

    Args:
        question (str): The question for the specialist.
    """
    seen_deadlines.append(remaining_time())  # the parent's deadline, inherited
    specialist = Agent(
        name="specialist",
        system_prompt="You are an audio-gear specialist.",
        model=ScriptedModel([
            calls(("search_reviews", {"product": "Sony WH-CH520"}), inp=1200, out=40),
            text("The Sony WH-CH520: 50 h battery, 4.6/5 from 1,203 reviews.", inp=1500, out=60),
        ], model="specialist-model"),
        toolkit=harness.instrument(Toolkit(tools=[FunctionTool(search_reviews, permission=ALLOW)])),
        middlewares=harness.middlewares(),
    )
    msg = await specialist.reply(UserMsg("concierge", question))
    return msg.get_text_content() or ""


async def main() -> None:
    concierge = Agent(
        name="concierge",
        system_prompt="You are the shop's concierge. Delegate audio questions.",
        model=ScriptedModel([
            calls(("ask_specialist", {"question": "Best headphones under $100?"}),
                       inp=900, out=30),
            text("Our audio specialist recommends the Sony WH-CH520 ($59): "
                "50 h battery, 4.6/5 from 1,203 reviews.", inp=1400, out=50),
        ], model="concierge-model"),
        toolkit=harness.instrument(Toolkit(tools=[FunctionTool(ask_specialist, permission=ALLOW)])),
        middlewares=harness.middlewares(),
    )
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        msg = await concierge.reply(UserMsg("user", "Which headphones under $100 should I buy?"))

    parent = harness.last_report(concierge)
    print("answer:", msg.get_text_content())
    print(f"parent: {parent.terminal_state.value} ({parent.reason}), "
          f"{parent.model_calls} model calls, ${parent.spent_usd:.6f} spent (child included)")
    for child in parent.children:
        print(f"  child {child.agent}: {child.terminal_state.value} ({child.reason}), "
              f"{child.model_calls} model calls, ${child.spent_usd:.6f}, tools {child.tool_calls}")
    print(f"deadline seen inside the tool: {seen_deadlines[0]:.1f}s left of 30s")


if __name__ == "__main__":
    asyncio.run(main())

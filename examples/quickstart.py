"""Quick start, offline: a harnessed AgentScope agent in ~40 lines.

The model is scripted (no API key needed) and stubborn: it searches the same
thing forever. The harness refuses the repeats, makes the run conclude and
reports honestly how it ended.

    python examples/quickstart.py
"""

import asyncio

from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, Ledger, Principal, ToolPolicy
from agentscope_harness.testing import ScriptedModel, calls

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")


async def search(query: str) -> str:
    """Search the catalogue.

    Args:
        query (str): What to look for.
    """
    return "SKU-1 Sony WH-CH520 $59; SKU-2 JBL Tune 510BT $39"


async def main() -> None:
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=3)},
        deadline_s=60,
    ))
    model = ScriptedModel([calls(("search", {"query": "headphones"}))], repeat=True)  # forever
    toolkit = harness.instrument(Toolkit(tools=[FunctionTool(search, permission=ALLOW)]))
    agent = Agent(name="shop", system_prompt="You are a shop assistant.", model=model,
                  toolkit=toolkit, middlewares=harness.middlewares())

    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        msg = await agent.reply(UserMsg("user", "Find me headphones under $100."))

    report = harness.last_report(agent)
    print("answer:        ", msg.get_text_content())
    print("terminal state:", report.terminal_state.value, f"({report.reason})")
    print("model calls:   ", report.model_calls, "| tool calls:", report.tool_calls,
          "| refusals:", report.refusals)
    for d in report.decisions:
        print(f"  {d.point:<15} {d.hook:<22} {d.action:<12} {d.code or ''}")


if __name__ == "__main__":
    asyncio.run(main())

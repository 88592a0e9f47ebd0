"""The harness around a real model: DashScope (Qwen) or any OpenAI-compatible API.

    DASHSCOPE_API_KEY=... python examples/real_model.py          # qwen-plus
    OPENAI_API_KEY=... python examples/real_model.py             # gpt-4o-mini
    OPENAI_API_KEY=... OPENAI_BASE_URL=http://localhost:8000/v1 \\
        OPENAI_MODEL=my-model python examples/real_model.py      # any compatible server

Without a key it prints a skip message and exits 0. The policy is the same as
offline; only the model changes. The run is billed by your provider (a few
cents at most: the cost cap below is $0.05).
"""

import asyncio
import os
import sys


def pick_model():
    """A real AgentScope chat model from the environment, or ``None``."""
    if os.environ.get("DASHSCOPE_API_KEY"):
        from agentscope.credential import DashScopeCredential
        from agentscope.model import DashScopeChatModel

        return DashScopeChatModel(
            credential=DashScopeCredential(api_key=os.environ["DASHSCOPE_API_KEY"]),
            model=os.environ.get("DASHSCOPE_MODEL", "qwen-plus"),
        )
    if os.environ.get("OPENAI_API_KEY"):
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIChatModel

        return OpenAIChatModel(
            credential=OpenAICredential(
                api_key=os.environ["OPENAI_API_KEY"],
                base_url=os.environ.get("OPENAI_BASE_URL") or None,
            ),
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        )
    return None


async def main() -> int:
    if not (os.environ.get("DASHSCOPE_API_KEY") or os.environ.get("OPENAI_API_KEY")):
        print("skipped: set DASHSCOPE_API_KEY or OPENAI_API_KEY (optionally OPENAI_BASE_URL, "
              "OPENAI_MODEL, DASHSCOPE_MODEL) to run this example against a real model.")
        return 0

    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from agentscope_harness import (
        CostPolicy,
        DependencyDown,
        Harness,
        HarnessConfig,
        Ledger,
        Principal,
        ToolPolicy,
    )

    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
    model = pick_model()

    async def search_products(query: str) -> str:
        """Search the shop catalogue.

        Args:
            query (str): What the customer is looking for.
        """
        return ("SKU-1: Sony WH-CH520 wireless headphones, $59\n"
                "SKU-2: JBL Tune 510BT wireless headphones, $39")

    async def check_stock(sku: str) -> str:
        """Check whether an item is in stock.

        Args:
            sku (str): The product SKU.
        """
        raise DependencyDown("inventory service", "connection refused")

    harness = Harness(HarnessConfig(
        tools={
            "search_products": ToolPolicy(role="retrieval", ledgers=["catalogue"]),
            "check_stock": ToolPolicy(role="lookup"),
        },
        ledgers={"catalogue": Ledger(cap=3)},
        # prices are USD per million tokens; set your model's real ones
        cost=CostPolicy(cap_usd=0.05, prices={model.model: (2.5, 10.0)}),
        deadline_s=90,
        max_model_calls=8,
    ))
    toolkit = harness.instrument(Toolkit(tools=[
        FunctionTool(search_products, permission=allow),
        FunctionTool(check_stock, permission=allow),
    ]))
    agent = Agent(
        name="shop",
        system_prompt="You are the customer-service assistant of an electronics shop. Be brief.",
        model=model, toolkit=toolkit, middlewares=harness.middlewares(),
    )
    with harness.acting_for(Principal(user_id="u-42", tenant="shop")):
        msg = await agent.reply(UserMsg(
            "user", "Find me wireless headphones under $100 and tell me if they are in stock.",
        ))
    report = harness.last_report(agent)
    print("model:", type(model).__name__, model.model)
    print("answer:", msg.get_text_content())
    print(f"terminal state: {report.terminal_state.value} ({report.reason}); "
          f"{report.model_calls} model calls, ${report.spent_usd:.4f}; tools {report.tool_calls}; "
          f"refusals {report.refusals}")
    for d in report.decisions:
        print(f"  {d.hook}: {d.action} {d.code or ''} {d.detail[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

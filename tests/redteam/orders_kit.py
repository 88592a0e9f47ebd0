"""Red-team helpers (rounds 101-106): a shop's order tools, each call
recorded in ``RAN`` as ``(tool, order_id)``; the claim pattern of a cancel;
a shop whose replies finish with ``submit_answer``; and a structured reply
read to the text it streamed and its final message."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from scripted import Ids, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

RAN: list[tuple[str, str]] = []
CANCEL_CLAIM = r"order (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(("lookup", order_id))
    return f"order {order_id}: shipped"


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    await asyncio.sleep(0.05)  # the order service takes a moment (a refusal beside it is written first)
    RAN.append(("cancel", order_id))
    return f"order {order_id} cancelled"


async def submit_answer(answer: str) -> str:
    """Submit the final answer.

    Args:
        answer (str): The answer for the user.
    """
    return "submitted"


def finishing_shop() -> tuple[Harness, Toolkit]:
    """A harness whose replies finish with ``submit_answer`` and whose
    ``cancel_order`` a claim of a cancel needs, and its toolkit."""
    harness = Harness(HarnessConfig(tools={
        "submit_answer": ToolPolicy(role="finish"),
        "cancel_order": ToolPolicy(role="mutation", claims=[CANCEL_CLAIM]),
    }), load_entry_points=False)
    return harness, harness.instrument(Toolkit(tools=[tool(cancel_order), tool(submit_answer)]))


async def structured_reply(agent: Any, prompt: str) -> tuple[str, Msg | None]:
    """A reply owing ``Ids``: the text it streamed, and its final message."""
    streamed, final = "", None
    async for item in agent.reply_stream(UserMsg("user", prompt), structured_schema=Ids, yield_final_msg=True):
        if isinstance(item, Msg):
            final = item
        elif isinstance(item, TextBlockDeltaEvent):
            streamed += item.delta
    return streamed, final

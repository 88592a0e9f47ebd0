"""The park scenarios of rounds 127 to 133: a card charged in one batch beside
a client-run code check (``client_tool(concurrent=True)``), the reader leaving
at the question (the reply left parked as at its end), the client's answer
coming back here or, from the saved state, on another worker of one SQLite
file. A charge's permission check may ask its provider first (``check_s``):
judged while, or after, the reply parks."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.agent import Agent
from agentscope.model import ChatModelBase
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALLOW, ScriptedModel, calls, client_tool, make_agent, text, tool, tool_messages

PAY = ("charge", {"order_id": "A-1", "amount": 80})
"""The model's one charge call; a card charged for it records ``("A-1", 80)``."""


class Checked(FunctionTool):
    """A tool whose permission check asks a service for ``check_s`` seconds."""

    check_s = 0.0

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> Any:
        await asyncio.sleep(self.check_s)
        return ALLOW


def checked(fn: Any, check_s: float | None) -> FunctionTool:
    """``fn`` as a tool, its permission checked for ``check_s`` (``None``: allowed at once)."""
    if check_s is None:
        return tool(fn)
    made = Checked(fn, permission=ALLOW)
    made.check_s = check_s
    return made


def charge_tool(card: list[tuple[str, int]], run_s: float = 0.5, check_s: float | None = None) -> FunctionTool:
    """The payment tool: each charge it makes is appended to ``card``, then
    its provider's round trip takes ``run_s``."""

    async def charge(order_id: str, amount: int) -> str:
        """Charge the customer's card for an order.

        Args:
            order_id (str): The order.
            amount (int): USD.
        """
        card.append((order_id, amount))
        await asyncio.sleep(run_s)
        return f"charged ${amount} for {order_id}"

    return checked(charge, check_s)


def pay_model(*then: Any) -> ScriptedModel:
    """The model checks the user's code and charges in one batch, then says ``then``."""
    return ScriptedModel([calls(("verify_code", {"code": "123"}), PAY), *(then or (text("Paid."), text("x")))])


def worker(path: str | None = None, timeout_s: float | None = None, **config: Any) -> Harness:
    """A worker: its store the SQLite file at ``path`` (``None``: in memory);
    ``charge`` a mutation unless ``tools`` says otherwise."""
    config.setdefault("tools", {"charge": ToolPolicy(role="mutation")})
    if path is not None:
        config["store"] = SQLiteStore(path) if timeout_s is None else SQLiteStore(path, timeout_s=timeout_s)
    return Harness(HarnessConfig(**config), load_entry_points=False, environ={})


def instrumented(h: Harness, *tools: Any) -> Toolkit:
    """``h``'s toolkit: the concurrent client-run ``verify_code`` beside ``tools``."""
    return h.instrument(Toolkit(tools=[client_tool(concurrent=True), *tools]))


def resumed(model: ChatModelBase, h: Harness, toolkit: Toolkit, saved: str, **kw: Any) -> Agent:
    """The agent a worker rebuilds from the state the app saved."""
    return make_agent(model, toolkit, h.middlewares(), state=AgentState.model_validate_json(saved), **kw)


async def charged_once(card: list[tuple[str, int]], within_s: float = 0.5) -> None:
    """Wait until the charge running beside the question has been made."""
    for _ in range(int(within_s / 0.005)):
        if card:
            return
        await asyncio.sleep(0.005)


def told(model: ScriptedModel, call: int = -1, but: str = "code ok") -> list[str]:
    """The tool results the model read in ``call``, less the client's answer."""
    return [m for m in tool_messages(model.calls[call]) if but not in m]

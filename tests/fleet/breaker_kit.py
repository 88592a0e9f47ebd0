"""What the shared-breaker tests (rounds 158 c and 159 a) build their workers
and replies from: two Harness instances on one Redis, a dependency that fails
until it is back, the results each agent's model read."""

from __future__ import annotations

import asyncio
import os

from agentscope.agent import Agent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from scripted import ALICE

from agentscope_harness import Harness, Principal
from agentscope_harness.stores import RedisStore

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")


def redis_store(prefix: str) -> RedisStore:
    """A worker's store on the fleet's Redis (the ``prefix`` fixture skips without one)."""
    return RedisStore(os.environ["HARNESS_TEST_REDIS_URL"], prefix=prefix)


def told(agent: Agent) -> list[str]:
    """Every tool result in the agent's context, as its model read it."""
    return [str(b.output) for m in agent.state.context if not isinstance(m.content, str)
            for b in m.content if isinstance(b, ToolResultBlock)]


async def reply(h: Harness, agent: Agent, who: Principal = ALICE) -> None:
    """One reply, read to its end, acting for ``who``."""
    with h.acting_for(who):
        async for _ in agent.reply_stream(UserMsg("user", "check the crm")):
            pass


class Payments:
    """A payments service that refuses connections until it is ``up``."""

    def __init__(self) -> None:
        self.up = False
        self.ran: list[str] = []

    async def refund(self, order: str, amount: float) -> str:
        """Refund an order.

        Args:
            order (str): The order.
            amount (float): USD.
        """
        self.ran.append(order)
        if not self.up:
            raise ConnectionError("payments: connection refused")
        return f"refunded {amount} on {order}"


class Crm:
    """A CRM that refuses connections until it is ``up``; ``answered`` is
    set by its first answer, which says ``says`` of the query."""

    def __init__(self, says: str = "crm says {q}") -> None:
        self.up = False
        self.calls: list[str] = []
        self.answered = asyncio.Event()
        self.says = says

    async def crm(self, q: str) -> str:
        """Ask the CRM.

        Args:
            q (str): What.
        """
        self.calls.append(q)
        if not self.up:
            raise ConnectionError("crm: connection refused")
        self.answered.set()
        return self.says.format(q=q)

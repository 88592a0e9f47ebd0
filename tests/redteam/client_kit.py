"""Red-team helpers: a refund the user's own backend executes
(``is_external_tool``), and what the client is handed of a call."""

from __future__ import annotations

from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from scripted import ALICE, ALLOW, ScriptedModel, calls, drain, make_agent, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy


class ClientRefund(ToolBase):
    """A refund the user's own backend executes (``is_external_tool``)."""

    name = "client_refund"
    description = "Refund an order of a user (run by the client)."
    input_schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "user_id": {"type": "string"},
                       "lines": {"type": "array", "items": {"type": "integer"}}},
        "required": ["order_id", "user_id"],
    }
    is_concurrency_safe = False
    is_read_only = False
    is_external_tool = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        return ALLOW


async def handed_to_client(raw: str) -> tuple[Harness, ScriptedModel, Any, list[Any]]:
    """Alice's reply whose model calls the client's refund with ``raw``: what the client is handed."""
    h = Harness(HarnessConfig(tools={"client_refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})}),
                load_entry_points=False)
    model = ScriptedModel([calls(("client_refund", raw)), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[ClientRefund()])), h.middlewares())
    with h.acting_for(ALICE):
        out = await drain(agent, UserMsg("user", "refund A-9"))
    return h, model, agent, [c for e in out if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]

"""Round 96 red team: ``calls.read_one_way`` treats keys that differ only in
case as two keys; Go's ``encoding/json`` (and .NET's case-insensitive
readers) read them as one, the last winning.

README ("Every call is gated"): a client-executed call "whose text a JSON
reader could read other than as it was judged (two objects, a repeated
key, ...) is refused (``bad_arguments``)"; ``read_one_way``'s own promise is
"whether every JSON reader reads ``written`` as ``judged``". Go's standard
``json.Unmarshal`` into ``struct{ UserID string `json:"user_id"` }`` matches
object keys to fields case-insensitively (Unicode simple folding: ``USER_ID``,
``uſer_id`` too) and assigns each match in order, so
``{"user_id": "u-42", "USER_ID": "u-7"}`` is ``user_id = "u-7"`` there. The
harness (and AgentScope, whose schema does not forbid other keys) reads
``user_id = "u-42"``: the identity check admits Alice's call and a Go client
refunds Bob's order."""

from __future__ import annotations

from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from scripted import ALICE, ALLOW, BOB, ScriptedModel, calls, drain, last_tool_message, make_agent, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy


class ClientRefund(ToolBase):
    """A refund the user's own backend (a Go service) executes."""

    name = "client_refund"
    description = "Refund an order of a user (run by the client)."
    input_schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "user_id": {"type": "string"}},
        "required": ["order_id", "user_id"],
    }
    is_concurrency_safe = False
    is_read_only = False
    is_external_tool = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        return ALLOW


async def test_keys_a_go_client_reads_as_one_are_refused() -> None:
    h = Harness(HarnessConfig(tools={"client_refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})}),
                load_entry_points=False, environ={})
    raw = f'{{"order_id": "B-1", "user_id": "{ALICE.user_id}", "USER_ID": "{BOB.user_id}"}}'
    model = ScriptedModel([calls(("client_refund", raw)), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[ClientRefund()])), h.middlewares())
    with h.acting_for(ALICE):
        out = await drain(agent, UserMsg("user", "refund B-1"))
    handed = [c for e in out if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]
    assert handed == [], [c.input for c in handed]  # a Go client would refund Bob's order
    assert "[harness:bad_arguments]" in last_tool_message(model)

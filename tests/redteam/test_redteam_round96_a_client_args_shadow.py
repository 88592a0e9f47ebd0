"""Round 96 red team: in shadow mode the new client-arguments check still
refuses the call, and records that it did not.

README: shadow mode "decide[s] and record[s], refuse[s] nothing (redaction, PII
and the fence stay on)"; a gate's refusal there is an ``enforced=False``
decision and the call runs (the identity gate's own refusal does). The
check Round 95 added in ``HarnessToolAdapter._judged`` (``read_one_way`` ->
``flow.read_otherwise``) returns ``_deny`` whatever the mode: the client is
never handed the call and the model is told ``[harness:bad_arguments]``,
while the report's ``client_arguments_check`` decision says
``enforced=False``. A team trying the harness in shadow on live traffic
gets calls silently refused, and a report that says none was."""

from __future__ import annotations

from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from scripted import ALICE, ALLOW, ScriptedModel, calls, drain, make_agent, text

from agentscope_harness import Harness, HarnessConfig


class ClientLookup(ToolBase):
    """An order lookup the client runs."""

    name = "client_lookup"
    description = "Look an order up (run by the client)."
    input_schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
        return ALLOW


async def test_shadow_mode_hands_the_client_the_call_it_would_refuse() -> None:
    h = Harness(HarnessConfig(mode="shadow"), load_entry_points=False, environ={})
    raw = '{"order_id": "A-9", "order_id": "A-9 "}'  # a repeated key: enforcing would refuse it
    model = ScriptedModel([calls(("client_lookup", raw)), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[ClientLookup()])), h.middlewares())
    with h.acting_for(ALICE):
        out = await drain(agent, UserMsg("user", "where is A-9"))
    report = h.last_report(agent)
    assert report is not None
    checks = [d for d in report.decisions if d.hook == "client_arguments_check"]
    assert checks and not checks[0].enforced  # recorded as not enforced ...
    handed = [c for e in out if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]
    assert [c.input for c in handed] == [raw]  # ... so the call is not refused

"""Round 114 (red team on round 113). Round 113 bounds AgentScope's permission check (a tool's
``check_permissions``) by the run's deadline (``tool_adapter._engine_decides``):
"cut, the call not made". But a check whose answer arrives past the deadline
anyway is taken as it is: a check that answers its cancellation with a
fallback ("policy service failed: ask a human", returning ``ASK`` from
``except CancelledError``), or one that blocks the loop (a synchronous policy
client) and returns ``ASK`` after the deadline. ``_engine_decides`` returns
that decision (``asyncio.timeout`` raises nothing when the body returns), and
``_judged`` parks the call: the run, past its deadline, asks the user and is
reported ``waiting_input`` instead of ending ``incomplete`` (``deadline``);
the harness's own ``ask_when`` in the same spot asks nothing once the run's
time is up (``CallFlow.judge``: "the approval's ``when`` took the run's time:
nothing is asked"). An ``ALLOW`` in the same place is cut (control).

README, Configuration: ``deadline_s`` "bounds every model call, store call,
async hook, AgentScope's permission check and tool call"; The deadline bounds
tools too: "A call that reaches its tool after the deadline (its judging took
longer) is not made, and says so ... the run ends `incomplete` (`deadline`)"."""
from __future__ import annotations

import asyncio
import time

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import TextBlock
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

RAN: list[str] = []


class Refund(ToolBase):
    name = "refund"
    description = "Refund an order."
    input_schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    is_concurrency_safe = False
    is_read_only = False
    is_external_tool = False
    mode = "swallow"
    answer = PermissionBehavior.ASK

    async def check_permissions(self, tool_input, context) -> PermissionDecision:
        if self.mode == "block":  # a synchronous policy client, slow today
            time.sleep(1.5)
            return PermissionDecision(behavior=self.answer, message="policy: ask a human")
        try:
            await asyncio.sleep(5)  # the policy service does not answer
        except asyncio.CancelledError:  # its client's fallback: ask a human
            return PermissionDecision(behavior=self.answer, message="policy service failed: ask a human")
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    async def call(self, order_id: str) -> ToolChunk:
        RAN.append(order_id)
        return ToolChunk(content=[TextBlock(text=f"refunded {order_id}")])


@pytest.mark.parametrize("mode,answer", [
    ("swallow", PermissionBehavior.ALLOW),  # control: cut
    ("swallow", PermissionBehavior.ASK),
    ("block", PermissionBehavior.ASK),
])
async def test_a_permission_check_answering_past_the_deadline_asks_nothing(mode, answer) -> None:
    RAN.clear()
    tool = Refund()
    tool.mode, tool.answer = mode, answer
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool])), h.middlewares())
    with h.acting_for(ALICE):
        events, final = await run(agent, "refund o-1")
    report = h.last_report(agent)
    asked = [e for e in events if isinstance(e, RequireUserConfirmEvent)]
    assert RAN == []
    assert not asked, f"the user was asked past the run's deadline: {final.get_text_content()!r}"
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline"), (
        report.terminal_state.value, report.reason)

"""Round 113 (tool gating). The harness judges every call at AgentScope's permission point and, once
its own gates pass, awaits AgentScope's permission engine (``next_handler``
in ``HarnessToolAdapter._judged``), which calls the tool's own
``check_permissions`` (a ``ToolBase`` that asks a policy service; also
``check_read_only``, ``match_rule``, ``generate_suggestions``). That await
is not bounded by the run's deadline: a slow or hung check holds the run
past ``deadline_s`` for as long as it takes (forever, if it never answers).

README, Configuration: ``deadline_s`` "run deadline (monotonic; bounds every
model call, store call, async hook and tool call)"; the harness bounds its
own ``ask_when`` (also a policy callable at this point) by the deadline."""

from __future__ import annotations

import asyncio
import time

import pytest
from agentscope.message import TextBlock, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

RAN: list[str] = []


class PolicyCheckedRefund(ToolBase):
    """A refund whose permission is asked of the company's policy service,
    which hangs today."""

    name = "refund"
    description = "Refund an order."
    input_schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    is_concurrency_safe = False
    is_read_only = False
    is_external_tool = False

    async def check_permissions(self, tool_input, context) -> PermissionDecision:
        await asyncio.sleep(5)  # the policy service does not answer
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    async def call(self, order_id: str) -> ToolChunk:
        RAN.append(order_id)
        return ToolChunk(content=[TextBlock(text=f"refunded {order_id}")])


async def _timed(h: Harness, toolkit: Toolkit) -> tuple[float, object]:
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    started = time.monotonic()
    with h.acting_for(ALICE):
        await agent.reply(UserMsg("user", "refund o-1"))
    return time.monotonic() - started, h.last_report(agent)


async def test_control_a_slow_ask_when_is_bounded_by_the_deadline() -> None:
    async def slow_rule(args: dict) -> str | None:
        await asyncio.sleep(5)
        return None

    h = Harness(HarnessConfig(deadline_s=1.0, hook_timeout_s=10,
                              tools={"refund": ToolPolicy(ask_when=slow_rule)}), load_entry_points=False)

    class Allowed(PolicyCheckedRefund):
        async def check_permissions(self, tool_input, context) -> PermissionDecision:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    took, report = await _timed(h, Toolkit(tools=[Allowed()]))
    assert took < 2.5, took
    assert report.reason == "deadline"


async def test_a_slow_permission_check_is_bounded_by_the_deadline() -> None:
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    took, report = await _timed(h, Toolkit(tools=[PolicyCheckedRefund()]))
    assert report.reason == "deadline"
    assert took < 2.5, f"deadline_s=1 but the reply took {took:.1f}s (the permission check's whole wait)"

"""Round 142 a: the arguments check takes plain `json.loads` of the stored text as
AgentScope's reading, but AgentScope reads a call with the tool's schema (it repairs
types even in valid JSON: "no" for a boolean is False, "5000" for an integer is 5000).

README "Combining": "A permission middleware of yours placed before the harness's may
read the call's arguments; one that passes changed arguments on (AgentScope runs the
tool with its own parse whatever a middleware passes) gets the call refused
(`policy_error`, decision `arguments_check`): the harness would judge another call
than the one made." CHANGELOG: gates run "on its own parsed and schema-validated
`tool_input` (the value the tool receives) ... No second JSON parser."

Attack: an audit middleware before the harness's passes on the arguments as the model
wrote them (`json.loads(tool_call.input)`, a common way to read them). The model writes
`{"amount": 5000, "dry_run": "no"}`. AgentScope's parse (the tool's) is
`dry_run=False`; the middleware passes `dry_run="no"` (truthy). `calls._reads_as`
returns True on `json.loads(written) == judged` before AgentScope's reader is asked, so
the check passes; the operator's hook reads a dry run and lets it through; the tool
moves 5000 for real.
Should: refused (arguments_check), as any other argument a middleware changed.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookContext, HookRejectSignal, ToolPolicy, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

MOVED: list[tuple[int, bool]] = []


async def transfer(amount: int, dry_run: bool) -> str:
    """Move money (or only check the transfer when dry_run).

    Args:
        amount (int): Cents.
        dry_run (bool): Only check, move nothing.
    """
    MOVED.append((amount, dry_run))
    return "checked" if dry_run else f"moved {amount}"


@harness_hook("pre_tool_call", priority=50, name="large_transfers_need_a_dry_run")
def large_transfers_need_a_dry_run(ctx: HookContext) -> Any:
    if not ctx.tool.args.get("dry_run") and int(ctx.tool.args.get("amount", 0)) > 100:
        raise HookRejectSignal("a real transfer over 100 is not allowed here", code="permission_denied")
    return None


class RawArgs(MiddlewareBase):
    """Passes on the arguments as the model wrote them (for an audit trail)."""

    def __init__(self, on: bool) -> None:
        super().__init__()
        self.on = on

    async def get_middleware_key(self) -> str:
        return "raw_args"

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if not self.on:
            return await next_handler(**input_kwargs)
        return await next_handler(**{**input_kwargs, "tool_input": json.loads(input_kwargs["tool_call"].input)})


@pytest.mark.parametrize("on", [False, True], ids=["control", "raw_json_args"])
async def test_args_read_otherwise_than_agentscope_are_refused(on: bool) -> None:
    MOVED.clear()
    model = ScriptedModel([calls(("transfer", {"amount": 5000, "dry_run": "no"})), text("done")])
    h = Harness(HarnessConfig(tools={"transfer": ToolPolicy(role="mutation")}),
                hooks=[large_transfers_need_a_dry_run], load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(transfer)])), middlewares=[RawArgs(on), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "pay")
    report = h.last_report(agent)
    refused = [(d.hook, d.code) for d in report.decisions if d.action == "refuse"]
    assert MOVED == [], f"the tool ran on AgentScope's parse the harness never judged: {MOVED}; refusals={refused}"

"""Round 141a: a middleware's changed arguments pass the arguments check when they
equal ANOTHER block of the same id and tool name in the message.

README "Combining": "A permission middleware of yours placed before the harness's may
read the call's arguments; one that passes changed arguments on (AgentScope runs the
tool with its own parse whatever a middleware passes) gets the call refused
(`policy_error`, decision `arguments_check`): the harness would judge another call
than the one made."

Attack: a provider numbering ids per message writes two calls of one tool under
`call_0`: delete_file(/tmp/scratch.txt) and delete_file(/etc/passwd) (run one after the
other, each judged). A "sandbox" middleware before the harness rewrites any path
outside /tmp to /tmp/scratch.txt in `tool_input`. `stored_text` picks, among the blocks
of `call_0`/delete_file, the first one reading as the judged input: the /tmp block, so
the second call is judged as /tmp/scratch.txt, passes the guard hook, and AgentScope
runs the tool on its own parse: /etc/passwd is deleted.
Should: the second call is refused (arguments_check); /etc/passwd never reaches the tool.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit

import agentscope_harness.testing as harness_testing
from agentscope_harness import Harness, HarnessConfig, HookContext, HookRejectSignal, ToolPolicy, harness_hook
from tests.redteam.files_kit import DELETED, delete_file
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio


class Sandbox(MiddlewareBase):
    async def get_middleware_key(self) -> str:
        return "sandbox"

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        args = dict(input_kwargs["tool_input"])
        if not str(args.get("path", "")).startswith("/tmp/"):
            args["path"] = "/tmp/scratch.txt"
        return await next_handler(**{**input_kwargs, "tool_input": args})


@harness_hook("pre_tool_call", priority=50, name="no_system_paths")
def no_system_paths(ctx: HookContext) -> Any:
    if str(ctx.tool.args.get("path", "")).startswith("/etc"):
        raise HookRejectSignal("system files are off limits", code="permission_denied")
    return None


async def test_changed_args_matching_a_sibling_block_are_refused(monkeypatch: Any) -> None:
    DELETED.clear()
    monkeypatch.setattr(harness_testing, "_call_id", lambda: "call_0")
    model = ScriptedModel([
        calls(("delete_file", {"path": "/tmp/scratch.txt"}), ("delete_file", {"path": "/etc/passwd"})),
        text("done"),
    ])
    h = Harness(HarnessConfig(tools={"delete_file": ToolPolicy(role="mutation")}), hooks=[no_system_paths],
                load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(delete_file)])),
                       middlewares=[Sandbox(), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "clean up")
    report = h.last_report(agent)
    refused = [(d.hook, d.code) for d in report.decisions if d.action == "refuse"]
    assert "/etc/passwd" not in DELETED, f"deleted={DELETED}; refusals={refused}"


async def test_control_single_call_is_refused(monkeypatch: Any) -> None:
    """Control (passes): the same sandbox on a lone /etc/passwd call is refused arguments_check."""
    DELETED.clear()
    model = ScriptedModel([calls(("delete_file", {"path": "/etc/passwd"})), text("done")])
    h = Harness(HarnessConfig(tools={"delete_file": ToolPolicy(role="mutation")}), hooks=[no_system_paths],
                load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(delete_file)])),
                       middlewares=[Sandbox(), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "clean up")
    report = h.last_report(agent)
    assert DELETED == []
    assert any(d.hook == "arguments_check" for d in report.decisions if d.action == "refuse")

"""Probes that held (kept as regression guards): candidate == live in a nested DONT_ASK
run; remembered approval in a sub-agent's own session; shadow sub-agent under an enforcing
lead's tool cap."""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.permission import PermissionMode
from agentscope.tool import Toolkit
from scripted import ALICE, RAN, ScriptedModel, calls, make_agent, parking_tools, run, search, text, tool

from agentscope_harness import Harness, HarnessConfig, HookContext, ToolPolicy, harness_hook

pytestmark = pytest.mark.asyncio


@harness_hook("pre_tool_call", priority=60, name="four_eyes", kind="observer")
def four_eyes(ctx: HookContext) -> None:
    if ctx.tool.name == "search":
        ctx.ask("")


def _cfg() -> HarnessConfig:
    return HarnessConfig(tools={"search": ToolPolicy(ask_when=lambda a: a["q"] == "b" and "\u200b")})


@pytest.mark.parametrize("dont_ask", [False, True])
async def test_candidate_same_as_live_in_sub_agent(dont_ask: bool) -> None:
    h = Harness(_cfg(), hooks=[four_eyes], candidate=_cfg(), load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("c"),
                                      text("c")]),
                       h.instrument(Toolkit(tools=[tool(search)])), h.middlewares(), name="child")
    if dont_ask:
        child.state.permission_context.mode = PermissionMode.DONT_ASK
    delegate, resume, asks = parking_tools(child)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead")]),
                      h.instrument(Toolkit(tools=[tool(delegate)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    cr = h.last_report(child)
    assert cr.candidate_differences == []
    if not dont_ask:
        assert cr.reason == "four_eyes asks a human to confirm this call"


async def test_shadow_sub_agent_meets_enforcing_lead_cap() -> None:
    lead_h = Harness(HarnessConfig(max_tool_calls=2), load_entry_points=False, environ={})
    sub_h = Harness(HarnessConfig(mode="shadow", tools={"search": ToolPolicy(ask_when=lambda a: "ask")}),
                    load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("c")]),
                       sub_h.instrument(Toolkit(tools=[tool(search)])), sub_h.middlewares(), name="child")

    async def delegate(task: str) -> str:
        """Ask.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead")]),
                      lead_h.instrument(Toolkit(tools=[tool(delegate)])), lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    cr = sub_h.last_report(child)
    asks = [d.tool for d in cr.decisions if d.action == "ask"]
    assert RAN == ["a"] and asks == ["search"], (RAN, [(d.hook, d.action, d.code) for d in cr.decisions])

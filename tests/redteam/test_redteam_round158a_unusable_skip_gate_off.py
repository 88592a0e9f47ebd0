"""Round 158 a: round 157 a skips the client-arguments check for a tool the caller cannot
use, trusting the authorization gate to refuse it; with that gate turned off nobody does."""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import client_tool, make_agent

from agentscope_harness import Harness, HarnessConfig, Principal
from agentscope_harness.testing import ScriptedModel, calls, text

TWO_WAYS = '{"code": "1111", "code": "2222"}'  # Python/JS read 2222; a first-wins reader 1111


async def handed(h: Harness, agent: Any, principal: Principal) -> tuple[list[str], Any]:
    out: list[str] = []
    with h.acting_for(principal):
        async for item in agent.reply_stream(UserMsg("user", "hi")):
            if isinstance(item, RequireExternalExecutionEvent):
                out += [c.input for c in item.tool_calls]
                break
    return out, h.last_report(agent)


@pytest.mark.parametrize("how", ["config", "env"])
async def test_two_way_arguments_handed_when_the_gate_is_off(how):
    """README "Every call is gated": client-run tools' "call whose text a JSON reader could
    read other than as it was judged (two objects, a key repeated, ...) is refused
    (bad_arguments, decision client_arguments_check) and never handed to the client";
    "disabled_hooks: a built-in hook turned off takes its enforcement with it" (the
    authorization gate's: allowed_tools, identity_args), not the client-arguments check,
    which is no hook. Attack: the deployment turns authorization_gate off (disabled_hooks /
    HARNESS_DISABLED_HOOKS), its principal lists allowed_tools without verify_code; the
    model repeats `code` with two values. read_otherwise sees the tool is unusable_by the
    principal and skips its check "for the authorization gate answers it permission_denied";
    the gate is off. Happened: the call is handed to the client as written, two readings."""
    config = HarnessConfig(disabled_hooks={"authorization_gate"}) if how == "config" else HarnessConfig()
    environ = {"HARNESS_DISABLED_HOOKS": "authorization_gate"} if how == "env" else {}
    h = Harness(config, load_entry_points=False, environ=environ)
    m = ScriptedModel([calls(("verify_code", TWO_WAYS)), text("x")])
    agent = make_agent(m, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    given, report = await handed(h, agent, Principal(user_id="u-42", allowed_tools=["statement"]))
    assert given == [], given


async def test_control_same_call_refused_for_a_caller_who_may_use_it():
    """Control (holds): the same call, gate off, by a caller whose allowed_tools list it."""
    h = Harness(HarnessConfig(disabled_hooks={"authorization_gate"}), load_entry_points=False, environ={})
    m = ScriptedModel([calls(("verify_code", TWO_WAYS)), text("x")])
    agent = make_agent(m, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    given, report = await handed(h, agent, Principal(user_id="u-42", allowed_tools=["verify_code"]))
    assert given == [], given

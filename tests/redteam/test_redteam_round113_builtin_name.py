"""Round 113 (tool gating). A tool of the application's own that shares its name with one of
AgentScope's built-in tools (``CompressContext``, which AgentScope only adds
when ``compression_tool_enabled``) is never judged: ``CallFlow._judge``
returns before every gate for any call whose *name* is in ``UNGATED_TOOLS``.
Its ``identity_args`` are not checked, ``max_tool_calls`` does not count it."""

from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ALLOW, ScriptedModel, calls, make_agent, text

pytestmark = pytest.mark.asyncio

RAN: list[dict] = []


async def compress_context(user_id: str, note: str) -> str:
    """Archive a user's conversation notes.

    Args:
        user_id (str): Whose notes.
        note (str): The note.
    """
    RAN.append({"user_id": user_id, "note": note})
    return f"archived for {user_id}"


async def lookup(user_id: str) -> str:
    """Look a user up.

    Args:
        user_id (str): Who.
    """
    RAN.append({"lookup": user_id})
    return f"user {user_id}"


def _agent(h: Harness, name: str, script: list) -> tuple:
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(compress_context, name=name, permission=ALLOW),
                                          FunctionTool(lookup, permission=ALLOW)]))
    model = ScriptedModel(script)
    return make_agent(model, toolkit, h.middlewares()), model


@pytest.mark.parametrize("name", ["archive_notes", "CompressContext"])
async def test_identity_args_hold_whatever_the_tools_name(name: str) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={name: ToolPolicy(identity_args={"user_id": "user_id"})}),
                load_entry_points=False)
    agent, _ = _agent(h, name, [calls((name, {"user_id": "u-7", "note": "x"})), text("done")])
    with h.acting_for(ALICE):
        await agent.reply(UserMsg("user", "archive"))
    assert RAN == [], f"{name} ran for another user: {RAN}"
    assert h.last_report(agent).refusals.get("permission_denied") == 1


@pytest.mark.parametrize("name", ["archive_notes", "CompressContext"])
async def test_max_tool_calls_counts_it(name: str) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(max_tool_calls=1), load_entry_points=False)
    agent, _ = _agent(h, name, [calls(("lookup", {"user_id": "u-42"})),
                                calls((name, {"user_id": "u-42", "note": "x"})), text("done")])
    with h.acting_for(ALICE):
        await agent.reply(UserMsg("user", "archive"))
    assert len(RAN) == 1, f"max_tool_calls=1 but {len(RAN)} calls ran: {RAN}"

"""Round 139 a: the arguments check compares the middleware's tool_input with the
middleware's tool_call.

README "Combining" / round 138: "A permission middleware of yours placed before the
harness's may read the call's arguments; one that passes changed arguments on
(AgentScope runs the tool with its own parse whatever a middleware passes) gets the call
refused (`policy_error`, decision `arguments_check`): the harness would judge another
call than the one made." DESIGN §4.1: a call is judged on exactly what the tool receives.

Attack: the application's canonicalising permission middleware (first in the list)
hands on a consistent canonical copy: both `tool_input` AND `tool_call` (its `.input`
re-serialised), as AgentScope's `next_handler(**kwargs)` allows. The model writes
`user_id="U-42 "` (another account on a case-sensitive backend).

What happened: `_judged` checks `as_parsed(call.input, view.args, ...)` with `call` =
`input_kwargs["tool_call"]`, i.e. the middleware's copy, so the two agree; the harness
judges "u-42" (the signed-in user) and admits it. AgentScope's `_acting` runs the
ORIGINAL tool_call (`Toolkit.call_tool` re-parses its input): `cancel_order` ran for
"U-42 ". Should: refused (arguments_check) as when only tool_input is changed.
Second route: the copy's call text made unreadable ("[redacted]"): `as_parsed` returns
True when AgentScope's reader raises ("AgentScope ... refuses the call itself"), but
AgentScope never reads that copy.
Fix: compare against the tool_call AgentScope will run (e.g. the agent's own context
block by id, or the id/input captured in the outermost position), not the chain's copy.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(f"cancel {order_id} {user_id!r}")
    return f"order {order_id} cancelled"


IDENTITY = {"cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})}


class CanonicalIds(MiddlewareBase):
    def __init__(self, also_call: str) -> None:
        super().__init__()
        self.also_call = also_call

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        canonical = {k: v.strip().lower() if isinstance(v, str) else v for k, v in input_kwargs["tool_input"].items()}
        passed = {**input_kwargs, "tool_input": canonical}
        if self.also_call:  # keep the copy consistent, or blank the raw text it no longer vouches for
            text = json.dumps(canonical) if self.also_call == "consistent" else "[redacted]"
            passed["tool_call"] = input_kwargs["tool_call"].model_copy(update={"input": text})
        return await next_handler(**passed)


@pytest.mark.parametrize("also_call", ["", "consistent", "redacted"],
                         ids=["input_only_control", "input_and_call", "call_text_unreadable"])
async def test_a_consistent_changed_copy_passes_the_arguments_check(also_call: str) -> None:
    RAN.clear()
    harness = Harness(HarnessConfig(tools=IDENTITY), load_entry_points=False)
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1", "user_id": "U-42 "})), text("Cancelled.")])
    agent = make_agent(model, [cancel_order], [CanonicalIds(also_call), *harness.middlewares()])
    with harness.acting_for(ALICE):
        await run(agent)
    report = harness.last_report(agent)
    assert RAN == [], (f"the tool ran for an identity the harness never judged: {RAN}; "
                       f"decisions={[(d.hook, d.action) for d in report.decisions]}")

"""Round 143 a: the arguments check reads the toolkit's tool of the call's name from
EVERY group (`Toolkit.get_tool`: the last group holding that name wins), while
AgentScope runs the tool of the ACTIVE groups (`check_tool_available(name,
activated_groups)`). A toolkit whose inactive group holds a tool of the same name
(a legacy version of the API kept for another workflow) gives the harness the other
tool's schema.

README "Combining": "A permission middleware of yours placed before the harness's may
read the call's arguments; one that passes changed arguments on ... gets the call
refused (`policy_error`, decision `arguments_check`) ... It judges AgentScope's own block
of the call, with the toolkit's tool of its name (never a tool object a middleware
passed) and that tool's schema-aware parse (`"no"` for a boolean is `false`; `1` is no
`true`)."

Attack: round 142 a's audit middleware (passes on `json.loads(call.input)`), before the
harness's. The active `transfer` declares `dry_run: bool`; an inactive group `legacy`
holds a `transfer` whose `dry_run` was text. The model writes `{"amount": 5000,
"dry_run": "no"}`. AgentScope runs the active tool on `dry_run=False`; the harness
parses the text with the legacy schema ("no" stays text), finds it equal to what the
middleware passed, and its gate reads a dry run: 5000 moved for real.
Control (no legacy group): refused, as round 142 a made it.
Also: with a middleware that changes nothing, a legitimate `{"amount": 50, "dry_run":
"false"}` (the active schema reads `false`, as the tool runs it) is refused: the legacy
schema reads text.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolGroup, Toolkit

from agentscope_harness import Harness, HarnessConfig, HookContext, HookRejectSignal, ToolPolicy, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

MOVED: list[tuple[Any, Any]] = []


async def transfer(amount: int, dry_run: bool = False) -> str:
    """Move money (or only check the transfer when dry_run).

    Args:
        amount (int): Cents.
        dry_run (bool): Only check, move nothing.
    """
    MOVED.append((amount, dry_run))
    return "checked" if dry_run else f"moved {amount}"


async def legacy_transfer(amount: int, dry_run: str = "yes") -> str:
    """The legacy transfer API (a text flag).

    Args:
        amount (int): Cents.
        dry_run (str): "yes" or "no".
    """
    return "legacy"


@harness_hook("pre_tool_call", priority=50, name="large_transfers_need_a_dry_run")
def large_transfers_need_a_dry_run(ctx: HookContext) -> Any:
    if ctx.tool.name == "transfer" and not ctx.tool.args.get("dry_run") and int(ctx.tool.args.get("amount", 0)) > 100:
        raise HookRejectSignal("a real transfer over 100 is not allowed here", code="permission_denied")
    return None


class RawArgs(MiddlewareBase):
    """Passes on the arguments as the model wrote them (for an audit trail), or as given."""

    def __init__(self, raw: bool) -> None:
        super().__init__()
        self.raw = raw

    async def get_middleware_key(self) -> str:
        return "raw_args"

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if not self.raw:
            return await next_handler(**input_kwargs)
        return await next_handler(**{**input_kwargs, "tool_input": json.loads(input_kwargs["tool_call"].input)})


def _toolkit(legacy: bool) -> Toolkit:
    groups = [ToolGroup("legacy", description="The legacy payment API (for old accounts).",
                        tools=[tool(legacy_transfer, name="transfer")])] if legacy else []
    return Toolkit(tools=[tool(transfer)], tool_groups=groups)


async def _run(args: dict[str, Any], legacy: bool, raw: bool) -> list[tuple[str, str | None]]:
    MOVED.clear()
    model = ScriptedModel([calls(("transfer", args)), text("done")])
    h = Harness(HarnessConfig(tools={"transfer": ToolPolicy(role="mutation")}),
                hooks=[large_transfers_need_a_dry_run], load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(_toolkit(legacy)), middlewares=[RawArgs(raw), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "pay")
    report = h.last_report(agent)
    return [(d.hook, d.code) for d in report.decisions if d.action == "refuse"]


@pytest.mark.parametrize("legacy", [False, True], ids=["control", "same_name_in_an_inactive_group"])
async def test_args_read_with_the_tool_agentscope_runs(legacy: bool) -> None:
    refused = await _run({"amount": 5000, "dry_run": "no"}, legacy, raw=True)
    assert MOVED == [], f"the tool ran on AgentScope's parse the harness never judged: {MOVED}; refusals={refused}"


@pytest.mark.parametrize("legacy", [False, True], ids=["control", "same_name_in_an_inactive_group"])
async def test_an_unchanged_call_is_not_refused(legacy: bool) -> None:
    refused = await _run({"amount": 50, "dry_run": "false"}, legacy, raw=False)
    assert MOVED == [(50, False)], f"a legitimate unchanged call was refused: {refused}"

"""Round 143 a: round 142's fix for a decorated method given bound (`spec_of`: "a
decorated method, given bound: it runs bound") holds only when the bound method's
function IS the spec's. A method with a wrapper above `@harness_hook` (a tracing or
metrics decorator made with `functools.wraps`, which copies `__harness_hook__`, as
`harness_hook` itself expects: "a wrapper's copy of it, functools.wraps, is not" a
second declaration) is a bound method of the wrapper: `spec_of` returns the spec whose
fn is the plain inner function, run without its `self`.

CHANGELOG round 142: "A decorated method given bound ran without its `self` (a safety
gate holding its client failed closed on every call): it runs bound." README "Writing
hooks": hooks are given as `hooks=[...]`, a safety hook fails closed only when its check
could not run.

Attack: `hooks=[FraudGate(client).check]` where `check` is `@traced` over
`@harness_hook(..., kind="safety")`. Seen: every refund refused `policy_error` (the
gate raised TypeError: missing `ctx`), the client never asked. Should: the gate runs
bound, asks its client, and a refund it clears runs. Control: the same gate without
the tracing decorator.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookContext, HookRejectSignal, ToolPolicy, harness_hook
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

REFUNDED: list[int] = []
ASKED: list[Any] = []


async def refund(amount: int) -> str:
    """Refund the customer.

    Args:
        amount (int): Cents.
    """
    REFUNDED.append(amount)
    return f"refunded {amount}"


def traced(fn: Any) -> Any:
    """A tracing decorator (a span around the call)."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await fn(*args, **kwargs)
    return wrapper


class FraudClient:
    def flagged(self, args: dict[str, Any]) -> bool:
        ASKED.append(args)
        return int(args.get("amount", 0)) > 10_000


class TracedGate:
    def __init__(self, client: FraudClient) -> None:
        self.client = client

    @traced
    @harness_hook("pre_tool_call", kind="safety", name="fraud_gate")
    async def check(self, ctx: HookContext) -> None:
        if ctx.tool.name == "refund" and self.client.flagged(dict(ctx.tool.args)):
            raise HookRejectSignal("flagged by the fraud check", code="permission_denied")


class PlainGate:
    def __init__(self, client: FraudClient) -> None:
        self.client = client

    @harness_hook("pre_tool_call", kind="safety", name="fraud_gate")
    async def check(self, ctx: HookContext) -> None:
        if ctx.tool.name == "refund" and self.client.flagged(dict(ctx.tool.args)):
            raise HookRejectSignal("flagged by the fraud check", code="permission_denied")


@pytest.mark.parametrize("gate_class", [PlainGate, TracedGate], ids=["control", "traced_method"])
async def test_a_wrapped_method_given_bound_runs_bound(gate_class: type) -> None:
    REFUNDED.clear()
    ASKED.clear()
    gate = gate_class(FraudClient())
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation")}), hooks=[gate.check],
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"amount": 500})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "refund my order")
    report = h.last_report(agent)
    refused = [(d.hook, d.code, d.detail) for d in report.decisions if d.action in ("refuse", "error")]
    assert ASKED == [{"amount": 500}], f"the gate never asked its client; refusals={refused}"
    assert REFUNDED == [500], f"a refund the gate clears was refused: {refused}"

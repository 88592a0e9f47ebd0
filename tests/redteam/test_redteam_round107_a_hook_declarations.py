"""Round 107 (a): a hook's declaration that would lose a gate without a word.

Two stacked ``@harness_hook`` decorators kept only the outer one (the
function's one ``__harness_hook__``): the user's safety gate under an
observer never ran, and a refund it refuses went through. A ``HookSpec``
built by hand (the type is public) skipped ``make_spec``'s checks: a safety
hook with the type's default ``fail_closed=False`` let a wire transfer run
when its check crashed. The same hook given twice, declared differently,
kept one silently. Each is refused at construction now, naming the hook."""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, HookSpec, harness_hook
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import RAN, ScriptedModel, calls, make_agent, run, text, tool


def test_a_second_declaration_on_one_function_is_refused() -> None:
    def no_refunds(ctx) -> None:
        if ctx.tool.name == "refund":
            raise HookRejectSignal("Refunds are not processed here; tell the user.")

    gate = harness_hook("pre_tool_call", priority=25, kind="safety")(no_refunds)
    with pytest.raises(HarnessConfigError, match="'no_refunds' is declared already .at pre_tool_call."):
        harness_hook("post_tool_call", priority=90, name="audit_log")(gate)
    assert gate.__harness_hook__.point == "pre_tool_call"  # the first declaration stands


def fraud_check(ctx) -> None:
    raise RuntimeError("fraud service unreachable")


@pytest.mark.parametrize("fields", [
    {"kind": "safety", "fail_closed": False},  # a safety hook must fail closed (left out: it does, round 176 a)
    {"kind": "safety", "fail_closed": True, "escape_key": "fraud"},  # a safety gate never latches open
    {"kind": "guard"},
    {"point": "before_tool"},
    {"priority": True},
    {"fail_closed": "yes"},
    {"point": "pre_think", "when": lambda policy, config: True},
])
def test_a_hand_built_spec_is_checked_as_a_declared_one(fields: dict) -> None:
    given = {"point": "pre_tool_call", "priority": 25, "name": "fraud_check", "escape_key": None, "kind": "observer",
             "module": __name__, "is_async": False, **fields}
    with pytest.raises(HarnessConfigError, match="hook 'fraud_check'"):
        HookSpec(fn=fraud_check, **given)


@pytest.mark.asyncio
async def test_a_safety_spec_built_by_hand_fails_closed() -> None:
    RAN.clear()
    spec = HookSpec(fn=fraud_check, point="pre_tool_call", priority=25, name="fraud_check", kind="safety",
                    escape_key=None, module=__name__, is_async=False, fail_closed=True)

    async def wire(amount: int) -> str:
        """Wire money.

        Args:
            amount (int): How much.
        """
        RAN.append(str(amount))
        return f"wired {amount}"

    h = Harness(HarnessConfig(), hooks=[spec], load_entry_points=False)
    model = ScriptedModel([calls(("wire", {"amount": 5000})), text("Wired.")])
    agent = make_agent(model, [tool(wire)], h.middlewares())
    await run(agent)
    assert RAN == []
    assert h.last_report(agent).refusals == {"policy_error": 1}


def test_one_hook_given_twice_differently_is_refused() -> None:
    first = HookSpec(fn=fraud_check, point="pre_tool_call", priority=25, name="fraud_check", kind="safety",
                     escape_key=None, module=__name__, is_async=False, fail_closed=True)
    second = HookSpec(fn=fraud_check, point="post_tool_call", priority=25, name="fraud_check", kind="safety",
                      escape_key=None, module=__name__, is_async=False, fail_closed=True)
    with pytest.raises(HarnessConfigError, match="'fraud_check' is given twice, declared differently"):
        Harness(HarnessConfig(), hooks=[first, second], load_entry_points=False)
    assert Harness(HarnessConfig(), hooks=[first, first], load_entry_points=False).hooks.count(first) == 1

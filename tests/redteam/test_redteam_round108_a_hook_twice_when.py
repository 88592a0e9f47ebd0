"""Round 108 (a). Round 107: "the same hook given twice, declared
differently, is refused" (README, Writing a hook). ``harness._unique``
compares the two specs with the dataclass's ``==``, and ``HookSpec.when`` is
declared ``field(compare=False)``: the same gate given twice, once for every
tool and once narrowed with ``when=`` to one tool, passes as "the same"; the
last one given is kept, silently, and the gate no longer runs for the other
tools (a transfer it refuses goes through)."""

from __future__ import annotations

import dataclasses

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import RAN, ScriptedModel, calls, make_agent, run, text, tool


@harness_hook("pre_tool_call", priority=25, name="no_money_out", kind="safety")
def no_money_out(ctx) -> None:
    if ctx.tool.name in ("refund", "wire"):
        raise HookRejectSignal("Money does not leave this account from here; tell the user.")


# the same gate, given again narrowed to refunds (a pack's copy, a second config path)
refunds_only = dataclasses.replace(
    no_money_out.__harness_hook__, when=lambda policy, config: policy is not None and policy.role == "mutation",
)


def test_the_same_hook_given_twice_with_another_when_is_refused() -> None:
    with pytest.raises(HarnessConfigError, match="given twice"):
        Harness(HarnessConfig(), hooks=[no_money_out, refunds_only], load_entry_points=False)


@pytest.mark.asyncio
async def test_the_gate_given_for_every_tool_still_runs_for_every_tool() -> None:
    RAN.clear()

    async def wire(amount: int) -> str:
        """Wire money.

        Args:
            amount (int): How much.
        """
        RAN.append(str(amount))
        return f"wired {amount}"

    try:
        h = Harness(HarnessConfig(), hooks=[no_money_out, refunds_only], load_entry_points=False)
    except HarnessConfigError:
        return  # refused: nothing lost
    model = ScriptedModel([calls(("wire", {"amount": 9000})), text("Wired.")])
    agent = make_agent(model, [tool(wire)], h.middlewares())
    await run(agent)
    assert RAN == [], "the gate declared for every tool was dropped for its narrowed copy"

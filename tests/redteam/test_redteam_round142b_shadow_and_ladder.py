"""Round 142 b (scenarios: writing hooks, shadow mode).

1. README Security, Shadow mode: "the report ends as enforcing would have ended the
   run ..., its decisions marked `enforced=False`"; "Writing a hook": "A hook that
   refuses at `pre_think`, `post_reflect` or `on_system_prompt`, or a safety hook that
   fails there, stops the run". Attack: such a hook, the same run enforced and in
   shadow. Happened: enforced ended `incomplete` (`policy_refused`/`policy_error`),
   shadow reported `completed` (`answered`): a rollout's report said the policy would
   change nothing though it would stop every run.
2. README: "A model that ignores a refusal is made to conclude on its next call and
   stopped if it keeps going" (hook 11: "ignored: the run ends `incomplete`, reason
   `refused:<code>`"). Attack: a fraud-check safety hook whose service is unreachable
   fails closed (`policy_error`, "Do not retry it"); the model retries the refund.
   Happened: the failures never entered the refusal ladder: `stalled` after 8 model
   calls, where the same gate refusing outright stops the run after 3.
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookContext,
    HookRejectSignal,
    TerminalState,
    ToolCallContext,
    harness_hook,
)
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
RAN: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return f"refunded {order_id}"


def _stop_point_hook(point: str, how: str, name: str) -> Any:
    def hook(ctx: HookContext) -> None:
        if how == "refuses":
            raise HookRejectSignal("Refunds are paused during the audit.", code="policy_refused")
        raise ConnectionError("policy service unreachable")

    return harness_hook(point, priority=60, name=name, kind="safety")(hook)


async def _reply(hooks: list[Any], script: list[Any], **config: Any) -> tuple[Harness, Any, str]:
    RAN.clear()
    h = Harness(HarnessConfig(**config), hooks=hooks, load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel(script), [refund], h.middlewares())
    _, final = await run(agent, "refund A-1")
    return h, h.last_report(agent), final.get_text_content() or ""


@pytest.mark.parametrize("how", ["refuses", "fails"])
@pytest.mark.parametrize("point", ["pre_think", "post_reflect", "on_system_prompt"])
async def test_shadow_reports_the_end_a_stopping_point_refusal_would_make(point: str, how: str) -> None:
    ends = {}
    for mode in ("enforce", "shadow"):
        hook = _stop_point_hook(point, how, f"audit_pause_{mode}")
        _, report, said = await _reply([hook], [calls(("refund", {"order_id": "A-1"})), text("Refunded A-1.")],
                                       mode=mode)
        ends[mode] = (report.terminal_state, report.reason)
        if mode == "shadow":
            assert said == "Refunded A-1."  # the user gets the model's answer
            assert RAN == ["refund:A-1"]  # nothing enforced
            assert any(d.hook == f"audit_pause_{mode}" and d.action == "refuse" and not d.enforced
                       for d in report.decisions)
    assert ends["enforce"] == (TerminalState.INCOMPLETE, "policy_refused" if how == "refuses" else "policy_error")
    assert ends["shadow"] == ends["enforce"], ends


async def test_a_safety_hooks_failure_met_again_climbs_the_refusal_ladder() -> None:
    @harness_hook("pre_tool_call", priority=25, name="fraud_check", kind="safety")
    def fraud_check(ctx: ToolCallContext) -> None:
        if ctx.tool.name == "refund":
            raise ConnectionError("fraud service unreachable")

    _, report, _ = await _reply([fraud_check], [calls(("refund", {"order_id": "A-1"}))] * 8 + [text("Refunded.")])
    assert RAN == []
    assert report.refusals.get("policy_error", 0) >= 2
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:policy_error")
    assert report.model_calls <= 4, report.model_calls

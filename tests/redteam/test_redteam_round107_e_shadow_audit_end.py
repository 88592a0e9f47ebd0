"""Round 107 (e). Shadow mode: the final answer carries personal data a
``HarnessConfig.pii`` kind ``block``s (or a safety hook at ``on_session_end``
refuses it). Enforcing, the run ends ``incomplete`` (``audit_failed``) and the
answer is withheld. In shadow mode the user gets the model's answer (fine:
"shadow mode refuses nothing"), but the report says ``completed``/``answered``:
not the end enforcement would have given.

README, "Shadow mode": "The user gets the model's answer; the report ends as
enforcing would have ended the run ... its decisions marked ``enforced=False``."
README, HarnessConfig ``mode``: "decide and record, refuse nothing".
CHANGELOG: "shadow-mode reports were not uniform ... each now ends it as
enforcing would (the user still gets the model's answer)".

Cause: ``lifecycle.ReplyLifecycle.session_end``: ``runner.run("on_session_end")``
returns no refusal in shadow mode (``runner._rejected``: ``if self.shadow:
return None``), so ``run.facts.conclude(INCOMPLETE, "audit_failed")`` is only
reached when enforcing; nothing records the would-be end.

Real ``Agent``, real tool in a real instrumented ``Toolkit``."""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, SessionEndContext, harness_hook
from tests.scripted import ALICE, ScriptedModel, make_agent, run, search, text, tool

pytestmark = pytest.mark.asyncio


@harness_hook("on_session_end", priority=50, name="no_refund_promises", kind="safety")
def no_refund_promises(ctx: SessionEndContext) -> None:
    if "refund" in (ctx.final_text or "").lower():
        raise HookRejectSignal("The answer promises a refund.", code="policy_refused")


CASES = {
    "pii_block": (dict(pii={"email": "block"}), (), "Write to jane.doe@example.com for help."),
    "safety_hook": ({}, (no_refund_promises,), "Your refund is on the way."),
}


async def _report(mode: str, case: str):
    cfg, hooks, answer = CASES[case]
    h = Harness(HarnessConfig(mode=mode, **cfg), hooks=list(hooks), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([text(answer)]), h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "help")
    return final.get_text_content() or "", h.last_report(agent)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_shadow_report_ends_as_enforcing_would_on_a_failed_audit(case: str) -> None:
    enforced_text, enforced = await _report("enforce", case)
    assert (enforced.terminal_state.value, enforced.reason) == ("incomplete", "audit_failed")
    assert "could not produce an answer" in enforced_text

    shadow_text, shadow = await _report("shadow", case)
    assert "could not produce an answer" not in shadow_text  # shadow delivers the model's answer: fine
    refused = [d for d in shadow.decisions if d.action == "refuse" and d.point == "on_session_end"]
    assert refused and not refused[0].enforced  # the audit's refusal is recorded, not enforced
    # ... yet the report does not end as enforcing would have
    assert (shadow.terminal_state.value, shadow.reason) == ("incomplete", "audit_failed"), (
        shadow.terminal_state.value, shadow.reason)

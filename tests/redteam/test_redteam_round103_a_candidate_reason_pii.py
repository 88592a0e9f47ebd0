"""Red team, round 103 (a): a candidate policy's stop reason reaches the
report raw. README (Personal data): "Reports (...), decisions and the
harness's log lines (...) carry no raw personal data unless
``record_raw=True``". The live report's ``reason`` is scrubbed
(``lifecycle.settle``), as is every decision's ``detail``
(``Services.record``), but ``Candidate._differs`` files the verdicts whole:
``candidate_differences`` keeps ``"fallback:<the stop's reason>"`` as the
hook wrote it, and the ``candidate_differs`` decision's ``code`` (the reason
after ``fallback:``) goes unscrubbed into the report, the
``harness.decision`` / ``harness.report`` events and the log line.

A candidate policy that tries a new safety hook (disabled in the live one)
whose stop reason names the customer is enough.

Real ``Agent``, a real tool in a real ``Toolkit``."""

from __future__ import annotations

import json
import logging

import pytest
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook

EMAIL = "bob.smith@example.com"


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return "nothing on file"


@harness_hook("pre_think", priority=60, name="watch_list_stop", kind="safety")
def watch_list_stop(ctx: HookContext) -> None:
    ctx.stop(f"customer {EMAIL} is on the watch list")


async def test_a_candidates_stop_reason_is_scrubbed_in_the_report(caplog: pytest.LogCaptureFixture) -> None:
    live = HarnessConfig(disabled_hooks={"watch_list_stop"})  # the new hook is tried on the candidate only
    h = Harness(live, hooks=[watch_list_stop], candidate=HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "bob"})), text("Nothing on file.")], stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    with caplog.at_level(logging.INFO, logger="agentscope_harness"), h.acting_for(ALICE):
        events, _ = await run(agent, "look bob up")
    report = h.last_report(agent)
    assert report is not None and report.candidate_differences  # the candidate would have stopped
    assert EMAIL not in report.reason  # the live reason: scrubbed, as promised
    dumped = report.model_dump_json()
    assert EMAIL not in dumped, f"the report carries the raw email: {report.candidate_differences}"
    shown = [json.dumps(e.value) for e in events if getattr(e, "name", None) in ("harness.decision", "harness.report")]
    assert not any(EMAIL in s for s in shown), "the decision/report events carry the raw email"
    assert EMAIL not in caplog.text, "a log line carries the raw email"

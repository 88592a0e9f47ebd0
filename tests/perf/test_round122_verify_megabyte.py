"""Round 122 red team: round 121 shapes a finishing tool's ``verify`` message as a notice
(``hooks/termination._verification_failed`` -> ``outputs.shaped_notice``): redaction,
``pii`` and ``neutralise_markers`` over the WHOLE message in one synchronous step. A
``verify`` that quotes the tool's text (README expects it: "which may quote the tool's
text") over a megabyte result holds the loop while the result itself is shaped in steps;
round 121 kept a refusal's message to 16 KB and a decision's detail to 4 KB for exactly
this, but not this message.

README, Security: "a result over 16 KB is redacted ... in steps ... and the loop gets a
turn after every millisecond of work"; hook 16: "a result of megabytes never holds the
event loop"; "a refusal's message is read to its first 16 KB ... (a hook quoting a
megabyte is shaped no further)". Measure and bound as tests/perf/test_round121_decision_detail.py.
"""
from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import loop_gaps
from tests.scripted import calls, text

pytestmark = pytest.mark.asyncio

PAGE = ("Quarterly figures. Contact ops@example.com for the keys AKIAIOSFODNN7EXAMPLE. " * 13_000)[:1_000_000]


async def submit_report(body: str) -> str:
    """Submit the report.

    Args:
        body (str): The report.
    """
    return PAGE


def _verify(saved: str) -> str | None:
    return None if "Total:" in saved else f"No 'Total:' line in the saved report: {saved}"


async def test_a_verify_message_quoting_a_megabyte_does_not_hold_the_loop() -> None:
    config = HarnessConfig(tools={"submit_report": ToolPolicy(role="finish", pii={"email": "redact"}, verify=_verify)})
    script = [calls(("submit_report", {"body": "Q3"})), text("done"), text("done"), text("done")]
    gap, bare, (model, bare_model), _ = await loop_gaps(script, [submit_report], "write the report", config, model="m")
    assert len(bare_model.calls) == 2
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same call: {bare * 1000:.1f} ms)")

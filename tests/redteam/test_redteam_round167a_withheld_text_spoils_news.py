"""Rounds 167 a and 168 a: a result a user's hook withheld, or rewrote, after the drift
tracker spoiled the news of the same text read later.

README row 20 drift_result_tracker: progress is new information "of what the model reads of
it", "each by a result the model read: one the harness withheld ... is no progress";
"Writing a hook": a post_tool_call hook may withhold a result (``HookRejectSignal``) or
rewrite ``ctx.result.text`` at any priority.

Attack: a compliance hook (post_tool_call, priority 60) withholds ``get_record`` (167 a), or
replaces its text with "held until verified" (168 a), until the caller is verified. Round 1:
the tracker (priority 50) has already read the record. Round 2: verify_identity. Round 3:
get_record again, now read: the model reads the record for the first time, yet the tracker
found its text "seen" (no news, no progress). Rounds 4 and 5 verify again (no news). The
model was told the last rounds "brought nothing new" (counting round 3). The same hook at
priority 40 (before the tracker) gives no such hint (control).
"""

from __future__ import annotations

import pytest
from hookkit import Ran, drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, HookRejectSignal, ToolPolicy, harness_hook

HELD = "The record is held until the caller is verified. Call verify_identity first."


def _hook(priority: int, verified: list[bool], rewrites: bool):
    @harness_hook("post_tool_call", priority=priority, name=f"verified_only_{priority}", kind="safety")
    def verified_only(ctx) -> None:
        if ctx.tool.name != "get_record" or verified:
            return
        if rewrites:
            ctx.result.text = HELD
            return
        raise HookRejectSignal("Verify the caller first; the record was withheld.", code="unverified")

    return verified_only


def _tools(ran: Ran, verified: list[bool]):
    async def get_record(patient: int, purpose: str = "care") -> str:
        """Get a patient's record.

        Args:
            patient (int): The patient number.
            purpose (str): Why it is read.
        """
        ran.append(("get_record", {"patient": patient, "purpose": purpose}))
        return (f"patient {patient}: allergy penicillin, blood type A negative, last visit march, "
                f"prescribed amoxicillin alternative azithromycin, follow up in six weeks with cardiology")

    async def verify_identity(pin: str) -> str:
        """Verify the caller.

        Args:
            pin (str): The caller's pin.
        """
        ran.append(("verify_identity", {"pin": pin}))
        verified[:] = [True]
        return "caller verified as doctor ross"

    return [get_record, verify_identity]


async def _go(priority: int, rewrites: bool):
    ran, verified = Ran(), []
    cfg = HarnessConfig(tools={"get_record": ToolPolicy(role="lookup"),
                               "verify_identity": ToolPolicy(role="lookup")},
                        stall_rounds=2, require_finish_tool=False)
    # the second read under another purpose: the rewritten first one succeeded (the same call is a repeat)
    script = [calls(("get_record", {"patient": 42})), calls(("verify_identity", {"pin": "1234"})),
              calls(("get_record", {"patient": 42, "purpose": "treatment"})),
              calls(("verify_identity", {"pin": "12345"})), calls(("verify_identity", {"pin": "0000"})),
              text("Patient 42 is allergic to penicillin.")]
    h, model, agent = harnessed(cfg, script, _tools(ran, verified), hooks=(_hook(priority, verified, rewrites),))
    _, final, report = await drive(h, agent)
    return ran, model, report


def _stall_hints(model) -> list[str]:
    # what the model read claiming round 3 (its first read of the record) brought nothing
    return [str(m)[-300:] for c in model.calls for m in c.formatted
            if "going round in circles" in str(m) or "brought nothing new" in str(m)]


@pytest.mark.parametrize("rewrites", [False, True])
@pytest.mark.parametrize("priority", [40, 60])
async def test_the_record_read_later_is_still_news(priority: int, rewrites: bool) -> None:
    ran, model, report = await _go(priority, rewrites)
    first = model.calls[1].tool_results
    assert any(("held until" if rewrites else "unverified") in t for t in first), first
    assert not any("allergy" in t for t in first)  # the model never read the record
    assert any("allergy penicillin" in t for t in model.calls[3].tool_results), model.calls[3].tool_results
    assert _stall_hints(model) == [], _stall_hints(model)[:1]

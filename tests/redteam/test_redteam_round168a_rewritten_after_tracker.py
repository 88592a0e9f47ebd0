"""Round 168 a: a result a user's hook *rewrote* after the drift tracker is remembered as what
the tracker read, not what the model read: the same text read later is no news.

README row 20 drift_result_tracker: "a result counts only if enough of the hashed 4-word
shingles of what the model reads of it (redacted, truncated, inside the fence) are new to
the run"; "Writing a hook": a hook may "rewrite ``ctx.result.text``" at any priority.
CHANGELOG 167 a: "the tracker's reading (``Novelty.judge``, ``Heard``) is remembered once
the model reads the result" -- but ``CallFlow.shape`` keeps ``result.heard`` (the text as
the tracker saw it at priority 50) whenever the chain did not refuse, even when a later hook
replaced the text, so the model never read what was kept.

Attack: the round 167 a scenario with the compliance hook (post_tool_call, priority 60)
*replacing* ``get_record``'s text with "held until verified" instead of raising. Round 1:
the model reads the placeholder; the record's shingles are kept. Round 3 (``purpose`` changed: the same
call again is a ``duplicate_call``, the rewritten one succeeded): the record is read for the first time, judged "seen": no progress, and the model is told the last rounds
brought nothing new. The same hook at priority 40 (before the tracker) gives no such hint.
"""

from __future__ import annotations

from hookkit import Ran, drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy, harness_hook

HELD = "The record is held until the caller is verified. Call verify_identity first."


def _hook(priority: int, verified: list[bool]):
    @harness_hook("post_tool_call", priority=priority, name=f"hold_until_verified_{priority}", kind="safety")
    def hold_until_verified(ctx) -> None:
        if ctx.tool.name == "get_record" and not verified:
            ctx.result.text = HELD

    return hold_until_verified


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


async def _go(priority: int):
    ran, verified = Ran(), []
    cfg = HarnessConfig(tools={"get_record": ToolPolicy(role="lookup"),
                               "verify_identity": ToolPolicy(role="lookup")},
                        stall_rounds=2, require_finish_tool=False)
    script = [calls(("get_record", {"patient": 42})), calls(("verify_identity", {"pin": "1234"})),
              calls(("get_record", {"patient": 42, "purpose": "treatment"})), calls(("verify_identity", {"pin": "12345"})),
              calls(("verify_identity", {"pin": "0000"})),
              text("Patient 42 is allergic to penicillin.")]
    h, model, agent = harnessed(cfg, script, _tools(ran, verified), hooks=(_hook(priority, verified),))
    _, final, report = await drive(h, agent)
    return ran, model, report


def _stall_hints(model) -> list[str]:
    return [str(m)[-300:] for c in model.calls for m in c.formatted
            if "going round in circles" in str(m) or "brought nothing new" in str(m)]


async def test_control_rewritten_before_the_tracker_the_record_read_later_is_news() -> None:
    ran, model, report = await _go(40)
    assert any("held until" in t for t in model.calls[1].tool_results), model.calls[1].tool_results
    assert any("allergy penicillin" in t for t in model.calls[3].tool_results), model.calls[3].tool_results
    assert _stall_hints(model) == []


async def test_rewritten_after_the_tracker_the_record_read_later_is_still_news() -> None:
    ran, model, report = await _go(60)
    assert any("held until" in t for t in model.calls[1].tool_results), model.calls[1].tool_results
    assert not any("allergy" in t for t in model.calls[1].tool_results)  # the model never read the record
    assert any("allergy penicillin" in t for t in model.calls[3].tool_results), model.calls[3].tool_results
    # the break: round 3 (the model's first read of the record) counted no progress
    assert _stall_hints(model) == [], _stall_hints(model)[:1]

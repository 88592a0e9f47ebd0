"""Round 167 a: a result a user's hook withheld after the drift tracker spoiled the news of the same text read later.
seen, so the same information read later is no news (the drift ladder climbs on it).

README row 20 drift_result_tracker: progress is new information "each by a result the model
read: one the harness withheld ... brings no fact, candidates or picks, and is no
progress"; "Writing a hook": a post_tool_call hook may withhold a result
(``HookRejectSignal``) at any priority. CHANGELOG 166 a: "the tracker's verdict is credited
with the rest once the model reads the result".

Attack: a compliance hook (post_tool_call, priority 60) withholds ``get_record`` until the
caller is verified. Round 1: get_record(42) is withheld; the tracker (priority 50) has
already put its text in ``facts.novelty``. Round 2: verify_identity. Round 3:
get_record(42) again, now read: the model reads the record for the first time, yet the
tracker finds its text "seen" (no news, no progress). Rounds 4 and 5 verify again (same answer,
no news). The model is told the last rounds "brought nothing new" (counting round 3) though
round 3 brought the record. The same
hook at priority 40 (before the tracker) gives no such hint (control).
"""

from __future__ import annotations

from hookkit import Ran, drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, HookRejectSignal, ToolPolicy, harness_hook


def _hook(priority: int, verified: list[bool]):
    @harness_hook("post_tool_call", priority=priority, name=f"verified_only_{priority}", kind="safety")
    def verified_only(ctx) -> None:
        if ctx.tool.name == "get_record" and not verified:
            raise HookRejectSignal("Verify the caller first; the record was withheld.", code="unverified")

    return verified_only


def _tools(ran: Ran, verified: list[bool]):
    async def get_record(patient: int) -> str:
        """Get a patient's record.

        Args:
            patient (int): The patient number.
        """
        ran.append(("get_record", {"patient": patient}))
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
              calls(("get_record", {"patient": 42})), calls(("verify_identity", {"pin": "12345"})),
              calls(("verify_identity", {"pin": "0000"})),
              text("Patient 42 is allergic to penicillin.")]
    h, model, agent = harnessed(cfg, script, _tools(ran, verified), hooks=(_hook(priority, verified),))
    _, final, report = await drive(h, agent)
    return ran, model, report


def _stall_hints(model) -> list[str]:
    # what the model read claiming round 3 (its first read of the record) brought nothing
    return [str(m)[-300:] for c in model.calls for m in c.formatted
            if "going round in circles" in str(m) or "last 3 rounds brought nothing new" in str(m)]


async def test_control_withheld_before_the_tracker_the_record_read_later_is_news() -> None:
    ran, model, report = await _go(40)
    assert any("allergy penicillin" in t for t in model.calls[3].tool_results), model.calls[3].tool_results
    assert _stall_hints(model) == []


async def test_withheld_after_the_tracker_the_record_read_later_is_still_news() -> None:
    ran, model, report = await _go(60)
    assert any("unverified" in t for t in model.calls[1].tool_results), model.calls[1].tool_results
    assert any("allergy penicillin" in t for t in model.calls[3].tool_results), model.calls[3].tool_results
    # the break: round 3 (first read of the record) counted no progress; the model is told 2 idle rounds
    assert _stall_hints(model) == [], _stall_hints(model)[:1]

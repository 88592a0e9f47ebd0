"""A candidate policy judged in shadow beside the live one: every call where
they decide differently is reported, and the candidate never enforces,
never charges the live ledgers and never changes what the model sees."""

from __future__ import annotations

import json
from typing import Any

from scripted import RAN, ScriptedModel, calls, make_agent, payload_bytes, run, search, text

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy
from agentscope_harness.cli import main


def ledger(cap: int, **kw: Any) -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=cap)}, **kw,
    )


def searches(*qs: str) -> list[Any]:
    return [calls(("search", {"q": q})) for q in qs]


async def drive(live: HarnessConfig, candidate: HarnessConfig | None, script: list[Any]):
    h = Harness(live, candidate=candidate, load_entry_points=False)
    model = ScriptedModel(script)
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    return h.last_report(agent), model


async def test_a_stricter_candidate_is_reported_and_enforces_nothing():
    script = [*searches("a", "b", "c", "d"), text("done")]
    report, model = await drive(ledger(5), ledger(2), script)
    assert RAN == ["a", "b", "c", "d"]  # the live policy decided
    assert report.refusals == {}
    assert report.candidate_differences == [
        {"point": "pre_tool_call", "tool": "search", "live": "allow",
         "candidate": "refuse:quota_exhausted", "code": "quota_exhausted"},
    ] * 2
    diffs = [d for d in report.decisions if d.action == "candidate_differs"]
    assert [d.detail for d in diffs] == ["live: allow; candidate: refuse:quota_exhausted"] * 2
    # what the model saw is what it sees without a candidate
    RAN.clear()
    _, alone = await drive(ledger(5), None, [*searches("a", "b", "c", "d"), text("done")])
    strip = [_no_nonce(payload_bytes(t)) for t in alone.calls]
    assert [_no_nonce(payload_bytes(t)) for t in model.calls] == strip


def _no_nonce(payload: str) -> str:
    import re

    return re.sub(r'nonce=\\"[0-9a-f]+\\"|call_[0-9a-f]+', "", payload)


async def test_a_looser_candidate_never_charges_the_live_ledgers():
    report, model = await drive(ledger(2), ledger(5), [*searches("a", "b", "c", "d"), text("done")])
    assert RAN == ["a", "b"]
    assert report.refusals == {"quota_exhausted": 2}
    assert [(d["live"], d["candidate"]) for d in report.candidate_differences] == [
        ("refuse:quota_exhausted", "allow")] * 2


async def test_parallel_calls_are_judged_against_what_really_ran():
    batch = calls(("search", {"q": "a"}), ("search", {"q": "b"}), ("search", {"q": "c"}))
    report, _ = await drive(ledger(3), ledger(1), [batch, text("done")])
    assert sorted(RAN) == ["a", "b", "c"]
    assert [(d["live"], d["candidate"]) for d in report.candidate_differences] == [
        ("allow", "refuse:quota_exhausted")] * 2


async def test_a_disabled_gate_in_the_candidate():
    script = [*searches("a", "a"), text("done")]
    report, _ = await drive(HarnessConfig(), HarnessConfig(disabled_hooks={"repeat_call_gate"}), script)
    assert report.candidate_differences == [
        {"point": "pre_tool_call", "tool": "search", "live": "refuse:duplicate_call",
         "candidate": "allow", "code": "duplicate_call"},
    ]


async def test_budget_decisions_before_the_model_call_are_compared():
    script = [*searches("a", "b", "c"), text("done")]
    report, model = await drive(HarnessConfig(), HarnessConfig(max_model_calls=2), script)
    assert len(model.calls) == 4
    think = [d for d in report.candidate_differences if d["point"] == "pre_think"]
    assert think == [{"point": "pre_think", "tool": None, "live": "model:full",
                      "candidate": "fallback:max_model_calls", "code": "max_model_calls"}] * 2


async def test_identical_policies_never_differ():
    script = [*searches("a", "b", "a"), text("done")]
    report, _ = await drive(ledger(2), ledger(2), script)
    assert report.refusals and report.candidate_differences == []


def test_diff_policy_summarises_a_log_of_reports(tmp_path, capsys):
    diff = {"point": "pre_tool_call", "tool": "search", "live": "allow",
            "candidate": "refuse:quota_exhausted", "code": "quota_exhausted"}
    child = {"candidate_differences": [diff]}
    lines = [
        json.dumps({"candidate_differences": [diff, diff], "children": [child]}),
        json.dumps({"candidate_differences": []}),
        "",
    ]
    log = tmp_path / "reports.jsonl"
    log.write_text("\n".join(lines))
    assert main(["diff-policy", str(log), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # three runs: the lead, its sub-agent's run nested in its report, the other
    assert summary["runs"] == 3 and summary["runs_with_differences"] == 2
    assert summary["by_point_tool_code"] == [
        {"point": "pre_tool_call", "tool": "search", "code": "quota_exhausted", "count": 3},
    ]
    assert summary["by_change"] == [{"live": "allow", "candidate": "refuse:quota_exhausted", "count": 3}]
    assert main(["diff-policy", str(log)]) == 0
    assert "quota_exhausted" in capsys.readouterr().out
    log.write_text("not json\n")
    assert main(["diff-policy", str(log)]) == 2

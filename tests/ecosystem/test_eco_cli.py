"""The ``agentscope-harness`` command: hooks, demo, check-config."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from agentscope_harness.cli import main
from agentscope_harness.demo import MAX_ITERS, SCENARIOS, run_scenario
from agentscope_harness.hooks import BUILTIN_HOOKS

BUILTIN_NAMES = [h.__harness_hook__.name for h in BUILTIN_HOOKS]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("HARNESS_") or k in ("OPENAI_API_KEY", "DASHSCOPE_API_KEY"))}
    env.update(extra)
    return env


def table_rows(out: str) -> list[str]:
    """Rows of the hooks table that describe a hook (a priority first)."""
    return [line for line in out.splitlines() if re.match(r"^│\s+\d+\s+│", line)]


# ------------------------------------------------------------------- hooks


def test_hooks_prints_the_25_builtins_in_run_order(capsys):
    assert main(["hooks", "--no-entry-points"]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert len(rows) == 25
    names = [row.split("│")[2].strip() for row in rows]
    assert sorted(names) == sorted(BUILTIN_NAMES)
    assert names.index("authorization_gate") < names.index("spend_gate") < names.index("tool_breaker_gate")
    assert "25 hooks, 25 enabled, mode=enforce" in out
    row = next(r for r in rows if " search_gate " in r)
    assert "efficiency" in row and "search_gate" in row.split("│")[-3] and "yes" in row


def test_hooks_json_has_every_column(capsys):
    assert main(["hooks", "--json", "--no-entry-points"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["hooks"]) == 25
    first = data["hooks"][0]
    assert set(first) >= {"point", "priority", "name", "module", "kind", "escape_key", "enabled"}
    spend = next(h for h in data["hooks"] if h["name"] == "spend_gate")
    assert (spend["point"], spend["priority"], spend["kind"], spend["escape_key"]) == \
        ("pre_tool_call", 30, "safety", None)
    assert spend["module"] == "agentscope_harness.hooks.budget"


def test_hooks_shows_what_the_env_flag_and_the_config_disabled(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_DISABLED_HOOKS", "search_gate, phase_step")
    policy = tmp_path / "policy.yaml"
    policy.write_text("disabled_hooks: [drift_detector]\n")
    assert main(["hooks", "--config", str(policy), "--no-entry-points"]) == 0
    out = capsys.readouterr().out
    rows = {row.split("│")[2].strip(): row for row in table_rows(out)}
    assert len(rows) == 25
    assert "no (env)" in rows["search_gate"] and "no (env)" in rows["phase_step"]
    assert "no (config)" in rows["drift_detector"]
    assert "yes" in rows["spend_gate"]
    assert "25 hooks, 22 enabled" in out
    assert "disabled by HARNESS_DISABLED_HOOKS: phase_step, search_gate" in out
    assert "disabled by the config: drift_detector" in out

    assert main(["hooks", "--json", "--config", str(policy), "--no-entry-points"]) == 0
    status = {h["name"]: h["status"] for h in json.loads(capsys.readouterr().out)["hooks"]}
    assert status["search_gate"] == "disabled (HARNESS_DISABLED_HOOKS)"
    assert status["drift_detector"] == "disabled (config)"
    assert status["spend_gate"] == "enabled"


def test_hooks_rejects_an_unknown_hook_name_in_the_env(capsys, monkeypatch):
    monkeypatch.setenv("HARNESS_DISABLED_HOOKS", "serch_gate")
    assert main(["hooks", "--no-entry-points"]) == 2
    err = capsys.readouterr().err
    assert "HARNESS_DISABLED_HOOKS" in err and "serch_gate" in err


def test_a_bad_env_flag_exits_2_naming_it(capsys, monkeypatch):
    monkeypatch.setenv("HARNESS_MODE", "loud")
    assert main(["hooks", "--no-entry-points"]) == 2
    assert "HARNESS_MODE='loud'" in capsys.readouterr().err


# ------------------------------------------------------------ check-config

GOOD_YAML = """\
tools:
  search: {role: retrieval, ledgers: [retrieval]}
  submit_answer: {role: finish, requires_facts: [retrieved]}
ledgers:
  retrieval: {cap: 8, soft_at: 6}
cost: {cap_usd: 0.5, prices: {gpt-4o-mini: [0.15, 0.6]}}
deadline_s: 120
"""

GOOD_PY = """\
from agentscope_harness import HarnessConfig, Ledger, ToolPolicy

def has_order_id(text):
    return None if "order" in text else "no order id in the confirmation"

CONFIG = HarnessConfig(
    tools={"web": ToolPolicy(role="retrieval", ledgers=["web"]),
           "place_order": ToolPolicy(role="finish", verify=has_order_id)},
    ledgers={"web": Ledger(cap=2)},
)
"""


def test_check_config_prints_the_effective_config_with_env_overrides(tmp_path, capsys, monkeypatch):
    policy = tmp_path / "policy.yaml"
    policy.write_text(GOOD_YAML)
    monkeypatch.setenv("HARNESS_MODE", "shadow")
    assert main(["check-config", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and "2 tool policies, 1 ledger" in out
    assert "HARNESS_MODE=shadow: mode enforce -> shadow" in out
    assert '"mode": "shadow"' in out

    assert main(["check-config", "--json", str(policy)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["mode"] == "shadow"
    assert data["config"]["ledgers"]["retrieval"] == {"cap": 8, "soft_at": 6, "on_exhausted": "stop", "extend_by": None}
    assert data["config"]["cost"]["prices"]["gpt-4o-mini"] == {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cached_input_per_mtok": None}


def test_check_config_accepts_python_and_json(tmp_path, capsys):
    py = tmp_path / "policy.py"
    py.write_text(GOOD_PY)
    assert main(["check-config", "--json", str(py)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["tools"]["place_order"]["verify"].endswith("has_order_id>")
    assert data["env_overrides"] == []

    js = tmp_path / "policy.json"
    js.write_text(json.dumps({"max_tool_calls": 12, "tools": {"s": {"role": "lookup"}}}))
    assert main(["check-config", str(js)]) == 0
    assert "1 tool policy" in capsys.readouterr().out


@pytest.mark.parametrize("name, content, field", [
    ("bad.json", '{"ledgers": {"retrieval": {"cap": -1}}}', "ledgers.retrieval.cap"),
    ("bad.yaml", "tools:\n  search: {role: serch}\n", "tools.search.role"),
    ("bad.yaml", "mode: fast\n", "mode"),
    ("bad.yaml", "max_tool_cals: 3\n", "max_tool_cals"),
    ("bad.yaml", "tools:\n  search: {ledgers: [web]}\n", "tools.search.ledgers"),
    ("bad.py", "from agentscope_harness import HarnessConfig, ToolPolicy\n"
               "config = HarnessConfig(tools={'x': ToolPolicy(units=-2)})\n", "ToolPolicy.units"),
])
def test_check_config_invalid_exits_2_naming_the_field(tmp_path, capsys, name, content, field):
    policy = tmp_path / name
    policy.write_text(content)
    assert main(["check-config", str(policy)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert field in captured.err, captured.err
    assert "Traceback" not in captured.err


def test_check_config_file_errors(tmp_path, capsys):
    assert main(["check-config", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = tmp_path / "nothing.py"
    empty.write_text("x = 1\n")
    assert main(["check-config", str(empty)]) == 2
    assert "neither `config` nor `CONFIG`" in capsys.readouterr().err
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    assert main(["check-config", str(listy)]) == 2
    assert "must be a mapping" in capsys.readouterr().err


# the console script sits next to the interpreter running the tests (the
# README's command runs .venv/bin/python, whose bin is not on PATH)
SCRIPT = pathlib.Path(sys.executable).with_name("agentscope-harness")


def test_console_script_check_config(tmp_path):
    assert SCRIPT.exists(), f"console script not installed next to {sys.executable}"
    bad = tmp_path / "bad.json"
    bad.write_text('{"deadline_s": 0}')
    proc = subprocess.run([str(SCRIPT), "check-config", str(bad)],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 2
    assert "deadline_s" in proc.stderr


# -------------------------------------------------------------------- demo


def test_demo_all_runs_offline_and_exits_0():
    proc = subprocess.run(
        [sys.executable, "-m", "agentscope_harness", "demo", "--scenario", "all"],
        capture_output=True, text=True, env=clean_env(COLUMNS="140"), timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in SCENARIOS:
        assert f"{name}: side by side" in out
    assert out.count("▶ bare agent") == 4 and out.count("▶ harnessed agent") == 4
    assert "⚑ repeat_call_gate: refuse duplicate_call" in out        # decisions shown live
    assert "⚑ authorization_gate: refuse permission_denied" in out
    assert "incomplete (stalled)" in out and "incomplete (budget)" in out
    assert "order A-1002 of u-77 CANCELLED" in out                   # the bare agent's damage
    assert "all scenarios" in out
    assert "WARNING" not in out + proc.stderr                        # no AgentScope log noise


def test_demo_without_a_key_for_the_real_model_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--model", "openai"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    assert main(["demo", "--model", "dashscope"]) == 2
    assert "DASHSCOPE_API_KEY" in capsys.readouterr().err
    assert main(["demo", "--model", "gemini"]) == 2
    assert "openai, dashscope" in capsys.readouterr().err


async def test_stubborn_scenario_bare_spins_harnessed_stops_honestly():
    scenario = SCENARIOS["stubborn"]
    bare = await run_scenario(scenario, harnessed=False)
    harn = await run_scenario(scenario, harnessed=True)
    assert bare.model_calls == MAX_ITERS + 1 and bare.ended == "exceed_max_iters"
    assert len(bare.executed) == MAX_ITERS + 1
    assert harn.model_calls <= 6 and len(harn.executed) <= 4
    assert harn.report.terminal_state.value == "incomplete"
    assert harn.report.reason == "stalled"
    assert harn.answer.startswith("I could not complete this request")
    assert harn.decisions == len(harn.report.decisions) > 0


async def test_other_scenarios_show_what_they_claim():
    down_bare = await run_scenario(SCENARIOS["dependency-down"], harnessed=False)
    down = await run_scenario(SCENARIOS["dependency-down"], harnessed=True)
    assert down_bare.executed.count("check_stock") == MAX_ITERS + 1
    assert down.executed.count("check_stock") <= 3
    assert "dependency_down" in down.report.refusals or "repeated_failure" in down.report.refusals

    attack_bare = await run_scenario(SCENARIOS["identity-attack"], harnessed=False)
    attack = await run_scenario(SCENARIOS["identity-attack"], harnessed=True)
    assert attack_bare.effects == ["order A-1002 of u-77 CANCELLED"]
    assert attack.effects == [] and attack.executed == []
    assert attack.report.refusals == {"permission_denied": 2}

    budget_bare = await run_scenario(SCENARIOS["budget"], harnessed=False)
    budget = await run_scenario(SCENARIOS["budget"], harnessed=True)
    assert budget_bare.usd > 0.05
    assert budget.usd <= 0.05 and budget.report.spent_usd <= 0.05
    assert (budget.report.terminal_state.value, budget.report.reason) == ("incomplete", "budget")
    assert any(d.action == "swap_model" for d in budget.report.decisions)


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out

"""Round 157 b (scenarios on the README's top sections, the command line and the demo).

README ("Use it"): "check-config ... (secret values as placeholders, in their own field
and wherever another quotes them; an invalid value named by its field and kind: a value
pydantic refused is never printed, and what a check quotes of the value it refused, an
unknown hook or ledger name, a pattern, has the policy's secret values redacted)".

- A secret quoted as a mapping key (a model's name in ``cost.prices``) was printed: the
  effective config's keys were not redacted.
- A secret quoted in a pattern as ``re.escape`` writes it (``zq\\-PYSECRET\\-99``) was
  printed: a pattern is also read with its escapes taken out.
- A check that quotes the value it refused (an unknown hook name, an unknown ledger, an
  invalid pattern) printed a secret the policy lists; the ``disabled_hooks`` error had no
  ``<file>: invalid policy`` prefix.
- The demo's policy let the model say "order A-1002 has been cancelled" after both of its
  calls were refused: ``cancel_order`` carries the README's claim pattern.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness
from agentscope_harness.demo import Shop, shop_config

SECRET = "zq-TOPSECRET-8812-abcd"


def _check_config(policy: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    return subprocess.run(
        [sys.executable, "-m", "agentscope_harness.cli", "check-config", str(policy)],
        capture_output=True, text=True, timeout=120, env=env,
    )


def test_a_secret_quoted_as_a_mapping_key_is_a_placeholder(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(f'secret_values: ["{SECRET}"]\ncost:\n  prices:\n    "{SECRET}": [1, 2]\n'
                      f'fallback_text: "call {SECRET} now"\n')
    out = _check_config(policy)
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout, [line for line in out.stdout.splitlines() if SECRET in line]
    assert out.stdout.count("[redacted:secret_value]") >= 2  # the key and the fallback's quote


def test_a_secret_quoted_in_an_escaped_pattern_is_a_placeholder(tmp_path: Path) -> None:
    policy = tmp_path / "pol.py"
    policy.write_text(
        "import re\nfrom agentscope_harness import HarnessConfig, ToolPolicy\n"
        f"SECRET = {SECRET!r}\n"
        "config = HarnessConfig(secret_values=[SECRET], redact_patterns=[re.escape(SECRET)],\n"
        "    tools={'submit': ToolPolicy(role='finish', claims=[re.escape(SECRET) + ' done'])})\n")
    out = _check_config(policy)
    assert out.returncode == 0, out.stderr
    shown = out.stdout.replace("\\", "")
    assert SECRET not in shown, [line for line in out.stdout.splitlines() if "TOPSECRET" in line]
    assert "[redacted:secret_value] done" in shown


@pytest.mark.parametrize("field", ["disabled_hooks", "ledger", "pattern"])
def test_a_refused_value_that_is_a_listed_secret_is_not_printed(tmp_path: Path, field: str) -> None:
    written = {
        "disabled_hooks": f'disabled_hooks: ["{SECRET}"]\n',
        "ledger": f'tools:\n  s: {{role: retrieval, ledgers: ["{SECRET}"]}}\n',
        "pattern": f'redact_patterns: ["{SECRET}("]\n',
    }[field]
    policy = tmp_path / f"{field}.yaml"
    policy.write_text(f'secret_values: ["{SECRET}"]\n' + written)
    out = _check_config(policy)
    assert out.returncode == 2, out.stdout
    said = out.stdout + out.stderr
    assert SECRET not in said, said
    assert f"{policy}: invalid policy" in " ".join(said.split()), said


def test_a_refused_value_that_is_no_secret_is_named(tmp_path: Path) -> None:
    """What a check quotes of a name is kept: it says which name to fix."""
    policy = tmp_path / "typo.yaml"
    policy.write_text('disabled_hooks: ["authorizaton_gate"]\n')
    out = _check_config(policy)
    assert out.returncode == 2 and "authorizaton_gate" in out.stdout + out.stderr


async def test_the_demo_policy_corrects_a_cancellation_that_never_happened() -> None:
    """The identity attack's model says it cancelled the order its refused calls never touched."""
    shop = Shop()
    harness = Harness(shop_config(), load_entry_points=False, environ={})
    args: dict[str, Any] = {"order_id": "A-1002", "user_id": "u-77"}
    model = ScriptedModel([calls(("lookup_order", args)), calls(("cancel_order", args)),
                           text("Done: order A-1002 has been cancelled.")])
    agent = make_agent(model, harness.instrument(shop.toolkit()), harness.middlewares())
    with harness.acting_for(ALICE):
        _, answer = await run(agent, "cancel A-1002")
    report = harness.last_report(agent)
    assert shop.executed == []
    assert (report.terminal_state, report.reason) == ("incomplete", "unsupported_claim"), report
    assert "cancel_order (order_id A-1002)" in answer.get_text_content()

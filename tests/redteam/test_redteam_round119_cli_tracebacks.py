"""``agentscope-harness check-config`` on wrong input: a traceback, not an error.

README "Use it": ``check-config ... validate (.py/.yaml/.json), print effective
config (secret values as placeholders; an invalid value named by its field and
kind, never printed)``; cli.py: "Exit codes: 0 fine, 2 invalid input (a bad
policy file ...)", ``CliError``: "A user-facing error: printed without a
traceback, exit code 2".

Three policy files reach the user as a Python traceback (exit 1):

- a JSON or YAML file nested deeper than the recursion limit (``RecursionError``:
  ``load_config`` catches ``ValueError``/``YAMLError`` only; ``diff-policy``
  catches ``RecursionError`` for the same input);
- a Python policy whose ``config`` is a factory that raises (``raw()`` is
  called outside the ``run_path`` guard that turns a failing policy into
  "failed to run"): the traceback quotes the policy's source line, a secret
  value written on it too;
- a text field holding a lone surrogate (valid JSON, ``"\\ud800"``), accepted
  by ``HarnessConfig``, then ``model_dump_json`` raises
  ``PydanticSerializationError`` in ``cmd_check_config``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "sk-live-Zq8pW3nR5tY7uI9oP1aSdFgH"

FILES = {
    "deep.json": '{"ledgers": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep.yaml": "ledgers: " + "[" * 5_000 + "]" * 5_000 + "\n",
    "factory.py": (
        "from agentscope_harness import HarnessConfig\n\n"
        "def config():\n"
        f"    return HarnessConfig(secret_values=[{SECRET!r}], tools=TOOLS)  # TOOLS: a typo'd name\n"
    ),
    "surrogate.json": '{"fallback_text": "Sorry \\ud800 ({reason})."}',
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_check_config_says_what_is_wrong_without_a_traceback(tmp_path: Path, name: str) -> None:
    policy = tmp_path / name
    policy.write_text(FILES[name], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "agentscope_harness", "check-config", str(policy)],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
    )
    printed = done.stdout + done.stderr
    assert SECRET[:12] not in printed, printed[-600:]
    assert "Traceback" not in printed, printed[-600:]
    assert done.returncode == 2, (done.returncode, printed[-600:])
    assert "error:" in done.stderr

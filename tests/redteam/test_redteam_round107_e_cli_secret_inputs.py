"""Round 107 (e). ``agentscope-harness check-config`` (and ``hooks
--config``) print a config's secret values when the policy file gives them
in the wrong shape: ``secret_values: sk-live-...`` (a string, not a list), or
an unquoted numeric secret in YAML (``- 4111111111111111``, read as an int).
The error line quotes the value: ``secret_values: Input should be a valid
list (got 'sk-live-...')``, on the terminal and in a CI log.

README ("Use it", the command line): "check-config ... validate
(.py/.yaml/.json), print effective config (secret values as placeholders)".
``config._Strict``: "Inputs are kept out of error messages: a config's input
may hold secret values" (``hide_input_in_errors=True``).

Cause: ``cli._format_validation`` appends ``(got {err['input']!r})`` for every
scalar input, reading ``ValidationError.errors()`` (which keeps the input
whatever ``hide_input_in_errors`` says), with no regard to the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "sk-live-Zq8pW3nR5tY7uI9oP1aSdFgH"
NUMERIC = "4111111111111111"

FILES = {
    "string_not_list.yaml": (f"secret_values: {SECRET}\n", SECRET),
    "unquoted_number.yaml": (f"secret_values:\n  - {NUMERIC}\n", NUMERIC),
    "number_in_json.json": (f'{{"secret_values": ["a-good-long-secret", {NUMERIC}]}}\n', NUMERIC),
}


@pytest.mark.parametrize("command", ["check-config", "hooks"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_an_invalid_policy_file_never_prints_its_secret_values(tmp_path: Path, name: str, command: str) -> None:
    text, secret = FILES[name]
    policy = tmp_path / name
    policy.write_text(text, encoding="utf-8")
    argv = [command, str(policy)] if command == "check-config" else [command, "--config", str(policy)]
    done = subprocess.run(
        [sys.executable, "-m", "agentscope_harness", *argv],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2, done.stderr  # refused, as it should be
    printed = done.stdout + done.stderr
    assert "secret_values" in printed  # the field is named
    assert secret not in printed, printed

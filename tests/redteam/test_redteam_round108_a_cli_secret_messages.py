"""Round 108 (a). A policy file's secret still reaches the terminal (and a CI
log) through the CLI's other error paths, and the Python API's error:

- a ``secret_env`` entry written as a ``.env`` line (``OPENAI_API_KEY=sk-...``,
  the usual mistake: the name with its value) is refused with the whole entry
  quoted: ``secret_env: [0]: 'OPENAI_API_KEY=sk-live-...' is not an
  environment variable name`` (``HarnessConfig._env_names`` puts ``{name!r}``
  in its message; ``hide_input_in_errors`` does not reach a message);
- a YAML syntax error, or a key given twice, on the line of ``secret_values``
  prints PyYAML's snippet of that line (``cli.load_config``: ``not valid
  YAML: {exc}``), the secret with it.

README ("Use it"): "check-config ... (secret values as placeholders; an
invalid value named by its field and kind, never printed)". config._Strict:
"Inputs are kept out of error messages: a config's input may hold secret
values"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentscope_harness import HarnessConfig, HarnessConfigError

SECRET = "sk-live-Zq8pW3nR5tY7uI9oP1aSdFgH"

FILES = {
    "env_line.yaml": f"secret_env:\n  - OPENAI_API_KEY={SECRET}\n",
    "env_line.json": f'{{"secret_env": ["OPENAI_API_KEY={SECRET}"]}}\n',
    "unclosed_list.yaml": f'secret_values: ["{SECRET}"\nfence: true\n',
    "key_twice.yaml": f'fence: true\nsecret_values: ["{SECRET}"]\nsecret_values: ["{SECRET}", "another-long-secret"]\n',
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_check_config_never_prints_a_secret(tmp_path: Path, name: str) -> None:
    policy = tmp_path / name
    policy.write_text(FILES[name], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "agentscope_harness", "check-config", str(policy)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2, done.stderr  # refused, as it should be
    printed = done.stdout + done.stderr
    assert SECRET[:12] not in printed, printed


def test_python_api_error_never_quotes_a_secret() -> None:
    with pytest.raises(Exception) as caught:
        HarnessConfig(secret_env=[f"OPENAI_API_KEY={SECRET}"])
    assert isinstance(caught.value, (HarnessConfigError, ValueError))
    assert SECRET not in str(caught.value), str(caught.value)

"""The README is part of the contract: its hook table and its commands must
match the code and CI."""

from __future__ import annotations

import pathlib
import re

from agentscope_harness import Harness
from agentscope_harness.hooks import BUILTIN_HOOKS

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
KINDS = {"safety": "S", "efficiency": "E", "transform": "T", "observer": "O"}


def test_readme_hook_table_matches_the_code() -> None:
    rows = re.findall(
        r"^\| (\d+) \| (\w+) \| (\w+) \| (\d+) \| (\w+) \| ([A-Z/]+) \|", README, re.MULTILINE,
    )
    assert len(rows) == 25 == len(BUILTIN_HOOKS)
    specs = {s.name: s for s in Harness(load_entry_points=False).all_hooks}
    for _, name, point, prio, module, kind in rows:
        spec = specs[name]
        assert (spec.point, spec.priority, spec.module.rsplit(".", 1)[-1]) == (point, int(prio), module)
        assert KINDS[spec.kind] in kind.split("/"), name


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"^python3 -m venv .*$", README, re.MULTILINE)
    assert len(commands) == 2
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()


def test_the_readme_example_runs_as_written(tmp_path: pathlib.Path) -> None:
    """The "Use it" example is complete code: extracted and run as a script."""
    import subprocess
    import sys

    section = README.split("## Use it", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # what the example promises: someone else's order refused, the user's own cancelled after its lookup
    assert proc.stdout.strip().endswith(
        "Cancelled A-1. | completed {'lookup_order': 1, 'cancel_order': 1} {'permission_denied': 1}",
    )


def test_the_hook_example_runs_as_written() -> None:
    """The "Writing a hook" example is complete code: run as written, its
    hook is one of the Harness's."""
    section = README.split("## Writing a hook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    scope: dict = {}
    exec(compile(code.group(1), "README: Writing a hook", "exec"), scope)
    assert "no_refunds_on_weekends" in scope["harness"].runner.by_name


def test_the_real_model_demo_says_in_a_line_when_the_model_cannot_be_reached() -> None:
    """``demo --model openai`` against a server that is not there: exit 2
    and one line saying why, not a traceback."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    proc = subprocess.run([sys.executable, "-m", "agentscope_harness", "demo", "--model", "openai"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "the openai model failed: APIConnectionError" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr

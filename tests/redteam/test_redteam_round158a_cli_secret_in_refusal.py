"""Round 158 a: check-config's redaction of what a check quotes (round 157 b) misses a
pattern escaped AND quoted with repr, and a Python policy whose HarnessConfig(...) raises
while the file runs (no policy read: no secret known)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "zq-TOPSECRET-8812-abcd"


def _check_config(policy: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "agentscope_harness.cli", "check-config", str(policy)],
        capture_output=True, text=True, timeout=120, env=env, cwd=Path(__file__).resolve().parents[2],
    )


def _leaked(out: subprocess.CompletedProcess[str]) -> list[str]:
    said = out.stdout + out.stderr
    return [line for line in said.splitlines() if "TOPSECRET" in line.replace("\\", "")]


def test_an_invalid_escaped_pattern_is_quoted_with_the_secret(tmp_path: Path) -> None:
    """README ("Use it", check-config): "what a check quotes of the value it refused, ... a
    pattern, has the policy's secret values redacted"; round 157 b: "a pattern read with its
    escapes taken out too". Attack: the policy lists the secret and a redact pattern written
    as re.escape(secret) with a typo (an unclosed group). The check quotes the pattern with
    !r: each escape's backslash doubled (zq\\\\-TOPSECRET...). _hidden takes one level of
    escapes out (zq\\-TOPSECRET...), which is still not the secret, nor its repr.
    Happened: `invalid regex 'zq\\\\-TOPSECRET\\\\-8812\\\\-abcd(': ...` printed."""
    policy = tmp_path / "p.json"
    escaped = SECRET.replace("-", "\\\\-")  # JSON text of re.escape(SECRET)
    policy.write_text(f'{{"secret_values": ["{SECRET}"], "redact_patterns": ["{escaped}("]}}')
    out = _check_config(policy)
    assert out.returncode == 2, out.stdout
    assert _leaked(out) == [], _leaked(out)


@pytest.mark.parametrize("where", ["redact_patterns", "claims_secret_env"])
def test_a_python_policy_whose_config_raises_prints_the_secret(tmp_path: Path, where: str) -> None:
    """README ("Use it", check-config): an invalid policy's check "has the policy's secret
    values redacted" in what it quotes; a .py policy exposing a HarnessConfig is a documented
    form (examples, README). Attack: the .py policy builds HarnessConfig(secret_values=[KEY],
    redact_patterns=[KEY + "("]) (or a ToolPolicy claim from its secret_env variable): the
    ValidationError is raised while runpy runs the file, so load_config's `raw` is still None
    and _secrets_of(None) is []: nothing is redacted.
    Happened: "invalid regex 'zq-TOPSECRET-8812-abcd('" printed in the clear."""
    policy = tmp_path / "pol.py"
    if where == "redact_patterns":
        policy.write_text("from agentscope_harness import HarnessConfig\n"
                          f"KEY = {SECRET!r}\n"
                          "config = HarnessConfig(secret_values=[KEY], redact_patterns=[KEY + '('])\n")
        out = _check_config(policy)
    else:
        policy.write_text("import os\nfrom agentscope_harness import HarnessConfig, ToolPolicy\n"
                          "config = HarnessConfig(secret_env=['SHOP_KEY'], tools={'pay': ToolPolicy(\n"
                          "    role='mutation', claims=['paid with key ' + os.environ['SHOP_KEY'] + '('])})\n")
        out = _check_config(policy, SHOP_KEY=SECRET)
    assert out.returncode == 2, out.stdout
    assert _leaked(out) == [], _leaked(out)


@pytest.mark.parametrize("pattern", ["[z]q-TOPSECRET-8812-abcd", "zq\\\\x2dTOPSECRET\\\\x2d8812\\\\x2dabcd"])
def test_a_valid_pattern_spelling_the_secret_otherwise_is_printed(tmp_path: Path, pattern: str) -> None:
    """Weaker (the secret is spelt by the pattern, not written in it): README "secret values
    as placeholders ... wherever another quotes them". A pattern naming the secret through a
    one-character class or a hex escape (`\\x2d` for `-`) is printed as written."""
    policy = tmp_path / "p.json"
    policy.write_text(f'{{"secret_values": ["{SECRET}"], "redact_patterns": ["{pattern}"]}}')
    out = _check_config(policy)
    assert out.returncode == 0, out.stderr
    assert not [line for line in out.stdout.splitlines() if "TOPSECRET-8812" in line or "TOPSECRET\\\\x2d" in line], out.stdout

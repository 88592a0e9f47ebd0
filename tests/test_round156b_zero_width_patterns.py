"""Round 156 b: a `redact_patterns` / `claims` entry that matches the empty string
only in some context (a lookaround: `(?<=token=)`, `(?=sk-)`) is accepted.

Promise (README "## Configuration"): "A config that would silently disable a limit is
invalid too: ... a `redact_patterns` or `claims` entry that matches the empty string".
Attack: `HarnessConfig(redact_patterns=["(?<=token=)"])` (the user forgot the `\\S+` after
the lookbehind). `config._regexes` only tries the pattern on three fixed probe texts, none
of which contains `token=`, so the zero-width pattern passes; at run time it matches the
empty string after `token=` and redacts nothing: the secret reaches the model, silently.
Should: refused at construction naming `redact_patterns` (the pattern's minimum width is 0:
`re._parser.parse(p, flags).getwidth()[0] == 0`).
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

ZERO_WIDTH = ["(?<=token=)", "(?=sk-)", "(?<=password: )"]


@pytest.mark.parametrize("pattern", ZERO_WIDTH)
def test_a_zero_width_redact_pattern_is_refused_naming_the_field(pattern: str) -> None:
    with pytest.raises(ValueError, match="redact_patterns"):
        HarnessConfig(redact_patterns=[pattern])


@pytest.mark.parametrize("pattern", ZERO_WIDTH)
def test_a_zero_width_claim_is_refused_naming_the_field(pattern: str) -> None:
    with pytest.raises(ValueError, match="claims"):
        ToolPolicy(claims=[pattern])


async def leak(q: str) -> str:
    """Read the config.

    Args:
        q (str): What.
    """
    return "token=hunter2-very-secret-value ok"


async def test_what_the_accepted_pattern_does_in_a_real_run() -> None:
    """The run it allows: the user's redaction is silently off (the value reaches the model)."""
    try:
        h = Harness(HarnessConfig(redact_patterns=["(?<=token=)"]), load_entry_points=False, environ={})
    except ValueError:
        return  # refused at construction: the promise holds
    model = ScriptedModel([calls(("leak", {"q": "a"})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(leak)])), h.middlewares())
    with h.acting_for(ALICE):
        await run(agent)
    seen = [m["content"] for m in model.calls[-1]["formatted"] if m["role"] == "tool"]
    assert "hunter2-very-secret-value" not in str(seen), seen


@pytest.mark.parametrize("secret", ["\u200b" * 8, "\u00a0\u200d" * 5, "\u2060" * 9])
def test_an_invisible_secret_value_is_refused_as_a_blank_one_is(secret: str) -> None:
    """Doc note of round 156 b: a secret made of zero-width characters was taken, though the
    fallback texts count such characters as showing nothing: it redacts no secret."""
    with pytest.raises(ValueError, match="secret_values"):
        HarnessConfig(secret_values=[secret])

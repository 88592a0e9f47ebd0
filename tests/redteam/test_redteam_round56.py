"""Red team, round 56 (on rounds 54-55, and items left in round 55).

1. pydantic reads ``True`` as 1 in a number field: ``Ledger(cap=True)`` was
   a cap of one unit, ``max_tool_calls=True`` one call, ``deadline_s=True``
   one second; a boolean in a number field is refused, named;
2. a policy file of ``null`` loaded as the defaults (an empty file still does).

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentscope_harness import CostPolicy, HarnessConfig, Ledger, ToolPolicy
from agentscope_harness.cli import CliError, load_config


@pytest.mark.parametrize(("make", "field"), [
    (lambda: Ledger(cap=True), "cap"),
    (lambda: Ledger(cap=5, soft_at=False), "soft_at"),
    (lambda: HarnessConfig(max_tool_calls=True), "max_tool_calls"),
    (lambda: HarnessConfig(deadline_s=True), "deadline_s"),
    (lambda: CostPolicy(cap_usd=True), "cap_usd"),
    (lambda: ToolPolicy(units=True), "units"),
])
def test_a_boolean_in_a_number_field_is_refused_named(make: Any, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make()
    assert caught.value.errors()[0]["loc"][-1] == field
    assert "boolean" in str(caught.value)


def test_boolean_fields_still_take_booleans() -> None:
    config = HarnessConfig(fence=False, record_raw=True, require_finish_tool=False)
    assert (config.fence, config.record_raw, config.require_finish_tool) == (False, True, False)


@pytest.mark.parametrize(("name", "text"), [("p.json", "null"), ("p.yaml", "null\n"), ("p.yml", "~\n")])
def test_a_policy_file_of_null_is_refused(tmp_path: Path, name: str, text: str) -> None:
    policy = tmp_path / name
    policy.write_text(text)
    with pytest.raises(CliError, match="must be a mapping of HarnessConfig fields, not null"):
        load_config(policy)


@pytest.mark.parametrize("text", ["", "# nothing set yet\n", "---\n"])
def test_an_empty_yaml_policy_is_the_defaults(tmp_path: Path, text: str) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    assert load_config(policy) == HarnessConfig()

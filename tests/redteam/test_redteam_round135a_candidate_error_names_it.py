"""Scenario round 135 (a): an invalid *candidate* config fails with an error that
names the field as if it were the live config's.

README, "Configuration": "``HarnessConfig`` is a pydantic model: invalid values fail
at construction with the field named"; "``Harness(config, hooks=(), candidate=None)``:
``candidate`` is a second ``HarnessConfig`` judged in shadow beside the live one".
The library itself says which policy an error belongs to where it checks both:
``Harness.instrument`` prefixes the candidate's errors with "candidate policy:" (its
docstring: "A candidate policy's names are checked too (its error says so)").

Attack: ``Harness(HarnessConfig(deadline_s=30), candidate={"deadline_s": -1})`` (a
candidate read from a policy file), and a candidate whose ``disabled_hooks`` names a
hook that does not exist.
Happened: ``HarnessConfigError: 1 validation error for HarnessConfig deadline_s ...``
and ``disabled_hooks: unknown hook name(s) ['nope']``: the field named is the live
config's, whose ``deadline_s`` (30) and ``disabled_hooks`` (empty) are fine; nothing
says the candidate is the one at fault. The operator edits the wrong policy.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError


@pytest.mark.parametrize("candidate", [
    {"deadline_s": -1},
    HarnessConfig(disabled_hooks={"nope"}),
], ids=["mapping-deadline", "disabled-hooks"])
def test_an_invalid_candidate_is_named_as_the_candidate(candidate) -> None:
    live = HarnessConfig(deadline_s=30)
    with pytest.raises(HarnessConfigError) as caught:
        Harness(live, candidate=candidate, load_entry_points=False)
    assert "candidate" in str(caught.value).lower(), str(caught.value)

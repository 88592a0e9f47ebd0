"""The harness's own work per round does not creep up unseen.

Between 0.1.0's last benchmark and session 42 the harness's cost per round
grew by half, a few calls a change, each too small for a timed benchmark on a
shared machine to see. The count of Python calls its code makes per round is
the same on every run, so a budget on it fails the change that adds work,
where the change is made."""

from __future__ import annotations

import asyncio

import pytest

from agentscope_harness.run_state import RunState
from benchmarks.overhead import CALL_BUDGET, harness_calls_per_round


def test_the_harness_makes_no_more_calls_per_round_than_its_budget() -> None:
    calls = asyncio.run(harness_calls_per_round())
    assert calls <= CALL_BUDGET, (
        f"the harness's own code made {calls:.0f} Python calls per round of the overhead reply "
        f"(budget {CALL_BUDGET}): find the new ones (sys.setprofile, counted per function) and "
        "take them out of the hot path, or raise benchmarks.overhead.CALL_BUDGET with the reason"
    )


def test_work_added_to_the_hot_path_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget can fail: a deadline check made ten times where it was
    made once is counted (the count is of the harness's own code)."""
    base = asyncio.run(harness_calls_per_round(rounds=10, reps=1))
    checked = RunState.past_deadline

    def checked_ten_times(self: RunState) -> bool:
        for _ in range(9):
            checked(self)
        return checked(self)

    monkeypatch.setattr(RunState, "past_deadline", checked_ten_times)
    more = asyncio.run(harness_calls_per_round(rounds=10, reps=1))
    assert more >= base + 9 * 3  # checked several times a round

"""The time left, as the model reads it (the wrap-up hint, the budget status line):
"0s" would tell a model with 0.4 s left that it has none (round 142 d)."""
from agentscope_harness.deadline import seconds_told


def test_seconds_are_told_in_tenths_under_ten() -> None:
    assert [seconds_told(x) for x in (0.44, 0.0, -3.0, 9.94, 10.0, 41.6)] == [
        "0.4s", "0.0s", "0.0s", "9.9s", "10s", "42s"]

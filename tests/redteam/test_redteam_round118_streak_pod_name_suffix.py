"""Round 118 (red team on rounds 116-117). Round 117 leaves the drift tracker's volatile tokens out of a failure's words, but a
Kubernetes pod's name (a Job's or a Deployment's pod: ``build-x2k9p``,
``api-7d9f8b6c4d-q8w2z``) ends in a 5-character random suffix that ``\\w+`` cuts off at
``-``: a short part with a digit, which ``_failure_words`` keeps as a WORD (only long
parts with a digit are volatile, and the drift tracker's ``_ID_WORD`` wants 8+ hex or
20+ characters). Every attempt runs in a new pod, so each failure reads "in other words",
the streak restarts at each successful mutation in between, and the doomed job runs
``REPEATED_FAILURES_PER_STREAK x max_identical_failures`` = 6 times (the backstop) instead
of being refused at its 4th attempt, as the hex control is (and as round 117 made the
UUID, ISO-time and duration cases).

README, repeat_call_gate: "Same call failing the same way max_identical_failures times in
a row: repeated_failure (never escapes; across a successful mutation the streak goes on
only if the call fails in the same words again, the drift tracker's volatile tokens
(UUIDs, times, durations, named ids), numbers, long parts with a digit and parts
switching case over and over left out ... *limit*: an id made of words, a container's
eager_turing, reads as words up to that)". A pod suffix is no id made of words.
Same stuck model as tests/redteam/test_redteam_round117_streak_volatile_parts.py."""
from __future__ import annotations

import itertools

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run

pytestmark = pytest.mark.asyncio

TAILS = {
    "hex": itertools.cycle(["(container c7f3a9e)", "(container a81d0b2)", "(container 9e4c1f7)",
                            "(container b20d8a3)"]),  # the control
    "job_pod": itertools.cycle([f"(pod build-{s})" for s in ("x2k9p", "7qz4m", "b8w2t", "k5n7r", "2fh9d", "m4x8c")]),
    "deployment_pod": itertools.cycle([f"(pod api-7d9f8b6c4d-{s})" for s in (
        "q8w2z", "h4k7n", "z9t2b", "c6m5x", "r2p8w", "t7v4q")]),
}
KIND: list[str] = []
RUNS: list[str] = []


async def run_job(job: str) -> str:
    """Run a job.

    Args:
        job (str): The job.
    """
    tail = next(TAILS[KIND[0]])
    RUNS.append(tail)
    raise RuntimeError(f"job {job} failed: cannot connect to the database {tail}")


async def set_config(key: str, value: str) -> str:
    """Set a config value.

    Args:
        key (str): The key.
        value (str): The value.
    """
    return f"config {key} set to {value}"


def stuck(turn):  # the model: run, edit, run, edit, ...
    n = len(stuck.seen)
    stuck.seen.append(n)
    if n % 2 == 0:
        return calls(("run_job", {"job": "build"}))
    return calls(("set_config", {"key": "db_timeout", "value": f"{10 * n}s"}))


@pytest.mark.parametrize("kind", ["hex", "job_pod", "deployment_pod"])  # control first
async def test_doomed_job_is_refused_at_its_fourth_attempt(kind: str) -> None:
    KIND[:] = [kind]
    RUNS.clear()
    stuck.seen = []
    h = Harness(HarnessConfig(tools={"set_config": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel(stuck)
    agent = make_agent(model, [run_job, set_config], middlewares=h.middlewares(), max_iters=40)
    h.instrument(agent.toolkit)
    await run(agent, "deploy the build")
    report = h.last_report(agent)
    assert len(RUNS) <= 3, (
        f"the doomed job ran {len(RUNS)} times, failing each time in the same words but for an id/time "
        f"{RUNS}; refusals {report.refusals}")

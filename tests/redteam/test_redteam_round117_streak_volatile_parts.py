"""Round 117 (red team on round 116). Round 117 (fix attack, priority 5): round 116 narrowed what counts as a volatile part
of a failure's words (``facts._volatile``): now only a number, a part of 7+ characters
with a digit, or one switching case over and over. But ``_WORD`` (``\\w+``) already cuts
ids and times at ``-``, ``:`` and ``.``, so the everyday per-attempt parts of an error
are short parts with a digit and now read as WORDS: a UUID's ``e29b``/``41d4``/``a716``,
an ISO time's ``05T10``/``55Z``, a duration's ``1532ms``. Each attempt then fails "in
other words", the streak restarts at every successful mutation between attempts, and a
doomed call runs 2 x ``max_identical_failures`` times (the run-wide backstop) instead of
being refused at its 4th attempt, as it was on round 115 and as the hex control is now.

README, repeat_call_gate: "across a successful mutation the streak goes on only if the
call fails in the same words again, numbers, long parts with a digit and parts switching
case over and over (ids, times, amounts) left out"; the stated limit is only "an id made
of words, a container's ``eager_turing``". Same stuck model as
tests/redteam/test_redteam_round116_streak_container_name.py."""
from __future__ import annotations

import itertools

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run

pytestmark = pytest.mark.asyncio

TAILS = {
    "hex": itertools.cycle(["(container c7f3a9e)", "(container a81d0b2)", "(container 9e4c1f7)",
                            "(container b20d8a3)"]),  # the control
    "uuid": itertools.cycle([f"(request {u})" for u in (
        "550e8400-e29b-41d4-a716-446655440000", "6fa459ea-ee8a-3ca4-894e-db77e160355e",
        "9b2c7e1d-3f4a-4c8b-9d2e-7a1b3c5d6e8f", "1c4e6a8b-2d3f-4a5b-8c7d-9e0f1a2b3c4d")]),
    "iso_time": itertools.cycle([f"(at 2026-12-05T10:{m}Z)" for m in ("13:55", "14:02", "14:09", "14:17")]),
    "duration": itertools.cycle(["(after 1532ms)", "(after 1498ms)", "(after 1611ms)", "(after 1575ms)"]),
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


@pytest.mark.parametrize("kind", ["hex", "uuid", "iso_time", "duration"])  # control first
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

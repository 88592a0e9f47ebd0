"""Round 116 (red team on round 115). A stuck model: it runs the same failing job over and over, each time after a
trivial config edit (a successful mutation). The job fails in the same words
every time but for the name of the fresh container it ran in (Docker's random
names: ``eager_turing``, ``silly_hopper``: an id with no digit and no case
switch). The failure streak restarts at every attempt, the loop detector never
fires (the job is half of the calls), the drift ladder never climbs (each edit
is a successful mutation): the run goes on to max_iters, running the doomed job
every other turn.

Control: the same run with the container named by a hex id (``c7f3a9e``) is
refused ``repeated_failure`` at the 4th attempt.

README, repeat_call_gate: "across a successful mutation the streak goes on only if
the call fails in the same words again, words with a digit or switching case over
and over (ids, times, amounts) left out"."""
from __future__ import annotations

import itertools

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run

pytestmark = pytest.mark.asyncio

NAMES = {
    "docker": itertools.cycle(["eager_turing", "silly_hopper", "focused_curie", "brave_lovelace",
                               "quirky_noether", "jolly_babbage", "vibrant_knuth", "dreamy_hodgkin"]),
    "hex": itertools.cycle(["c7f3a9e", "a81d0b2", "9e4c1f7", "b20d8a3"]),
}
KIND: list[str] = []
RUNS: list[str] = []


async def run_job(job: str) -> str:
    """Run a job in a fresh container.

    Args:
        job (str): The job.
    """
    name = next(NAMES[KIND[0]])
    RUNS.append(name)
    raise RuntimeError(f"job {job} failed in container {name}: exit status nonzero, "
                       "error: cannot connect to the database")


async def set_config(key: str, value: str) -> str:
    """Set a config value.

    Args:
        key (str): The key.
        value (str): The value.
    """
    return f"config {key} set to {value}"


def stuck(turn):  # the model: edit, run, edit, run, ...
    n = len(stuck.seen)
    stuck.seen.append(n)
    if n % 2 == 0:
        return calls(("run_job", {"job": "build"}))
    return calls(("set_config", {"key": "db_timeout", "value": f"{10 * n}s"}))


@pytest.mark.parametrize("kind", ["hex", "docker"])  # control first
async def test_stuck_job_retry_is_stopped(kind: str) -> None:
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
    # a container's name made of words reads as words (README limit): the streak restarts, and
    # the backstop refuses the call once it failed 2 x max_identical_failures times since it last succeeded
    assert len(RUNS) <= 6, (
        f"the same doomed job ran {len(RUNS)} times ({model.calls.__len__()} model calls); "
        f"report {report.terminal_state.value}/{report.reason}, refusals {report.refusals}, "
        f"decisions {[d.action for d in report.decisions]}")

"""A model stuck on a doomed job: it runs the job, makes a harmless config edit
(a successful mutation), runs the job again, and so on. The job fails in the
same words each time but for what changes on every attempt; across each edit
the failure streak must read it as the same failure, so ``repeated_failure``
refuses the 4th attempt (the job runs 3 times). Each edit is progress to the
drift ladder, and the job is 3 of the last 6 calls (the loop detector's
threshold is 4): the streak is the one guard that stops it.

What changes, by the round that found it read as new words:

- round 116: a container's hex id is the control; a Docker name made of words
  (``eager_turing``) is the README's stated limit: the streak restarts, and the
  backstop (``Failures.total``: twice ``max_identical_failures`` failures since
  the call last succeeded) stops it at 6 runs (it ran 21 times before);
- round 117: a request UUID, an ISO time, a duration (their short parts read
  as words once split at ``-``, ``:`` and ``.``);
- round 118: a pod's random suffix (``build-x2k9p``, ``api-7d9f8b6c4d-q8w2z``);
- round 119: a pod's suffix with no digit (``kxzvq``) or ending in one
  (``qzwx7``), a temporary directory (``/tmp/tmpk_qzwvbn2``);
- round 121: a base64 id split at its ``+ / - _`` (an S3 host id, a url-safe
  token), ``mktemp``'s ``tmp.XXXXXXXXXX``;
- round 122: PHP's, GCC's and Rust's temporary names under ``/tmp``.

README, repeat_call_gate: "Same call failing the same way
`max_identical_failures` times in a row: `repeated_failure` (never escapes;
across a successful mutation the streak goes on only if the call fails in the
same words again, ... left out ...)"."""
from __future__ import annotations

import itertools

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run

pytestmark = pytest.mark.asyncio

TAILS = {
    "hex": ["container c7f3a9e", "container a81d0b2", "container 9e4c1f7", "container b20d8a3"],  # control
    "uuid": [f"request {u}" for u in (
        "550e8400-e29b-41d4-a716-446655440000", "6fa459ea-ee8a-3ca4-894e-db77e160355e",
        "9b2c7e1d-3f4a-4c8b-9d2e-7a1b3c5d6e8f", "1c4e6a8b-2d3f-4a5b-8c7d-9e0f1a2b3c4d")],
    "iso_time": [f"at 2026-12-05T10:{m}Z" for m in ("13:55", "14:02", "14:09", "14:17")],
    "duration": ["after 1532ms", "after 1498ms", "after 1611ms", "after 1575ms"],
    "job_pod": [f"pod build-{s}" for s in ("x2k9p", "7qz4m", "b8w2t", "k5n7r", "2fh9d", "m4x8c")],
    "deployment_pod": [f"pod api-7d9f8b6c4d-{s}" for s in ("q8w2z", "h4k7n", "z9t2b", "c6m5x", "r2p8w", "t7v4q")],
    "pod_letters_only": [f"pod build-{s}" for s in ("kxzvq", "tbhwm", "qdrlz", "wjxpc", "mvkts", "hfzqn")],
    "pod_ending_in_digit": [f"pod build-{s}" for s in ("qzwx7", "hbtk4", "rmdz9", "cxvl2", "pwkq5", "tznj8")],
    "temp_dir": [f"in /tmp/tmp{s}/out.csv" for s in ("k_qzwvbn2", "x_hrtplm7", "w_zcvbqr4", "j_mnbvcx5",
                                                       "p_lkjhgf6", "d_qwrtzp9")],
    "s3_host_id": [f"<Code>AccessDenied</Code><HostId>{h}</HostId>" for h in (
        "wnEMg4aey3l5/j+h7WcsnVOIAMslFKkvk3kYGMbtU3KBtKtNnK9MJCUvNhdf0eeJP91Ez8D57+M=",
        "Jy+FsWJ/a6Jnq7gKy4ZumDQHcftyvWpluF369qp493OWd2enU5cpvX6ElZ04DWumZ4hRKKZYhZ8=",
        "hBbXA9Bl6tS2/kOHi5MrENO9Pg9liiAJC32xMI8rK+E4+u89JZKAmRR+swfAHDLHrmjEdhP2h1M=",
        "sIX+SVrSnQfAKvoRTxcqkHBxK8QuGaEbEZqAZuT7mBtctLnYs5x4ShqN8mKqihsRHURC9QXvUgQ=")],
    "upload_token": [f"upload session {t} rejected" for t in (
        "7-JsB_8NIdfbCzN3dzilxg", "dNN_8TbqwT9VMiOmOEFGDQ", "N_N_-1mRdSqAHVbfDLqeKg", "F-nNsDuqZjImwnD3lo4Q9w")],
    "mktemp": [f"cannot write /tmp/tmp.{s}/out" for s in ("AbCdEfGhIj", "kLmNoPqRsT", "uVwXyZaBcD", "eFgHiJkLmN")],
    "php_upload": [f"cannot move /tmp/php{s} to /var/www/uploads" for s in ("YzdqkD", "eyZhHO", "txFNna", "dalSsU")],
    "php_upload_digit_end": [f"cannot move /tmp/php{s} to /var/www/uploads" for s in ("gGKQY2", "CspoK1", "kcRCR7",
                                                                                       "pQwZt3")],
    "gcc_temp": [f"as: cannot open /tmp/cc{s}.s" for s in ("eyZhHO", "txFNna", "dalSsU", "YzdqkD")],
    "rust_tempfile": [f"cannot persist /tmp/.tmp{s}/out" for s in ("eyZhHO", "txFNna", "dalSsU", "YzdqkD")],
    "docker": ["container eager_turing", "container silly_hopper", "container focused_curie",
               "container brave_lovelace", "container quirky_noether", "container jolly_babbage",
               "container vibrant_knuth", "container dreamy_hodgkin"],
}
RUNS_AT_MOST = {"docker": 6}  # the README's limit: an id made of words; the backstop stops it
CYCLE: list[itertools.cycle[str]] = []
RUNS: list[str] = []


async def run_job(job: str) -> str:
    """Run a job.

    Args:
        job (str): The job.
    """
    tail = next(CYCLE[0])
    RUNS.append(tail)
    raise RuntimeError(f"job {job} failed: cannot connect to the database ({tail})")


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


@pytest.mark.parametrize("kind", list(TAILS))
async def test_a_doomed_job_beside_harmless_edits_is_stopped(kind: str) -> None:
    CYCLE[:] = [itertools.cycle(TAILS[kind])]
    RUNS.clear()
    stuck.seen = []
    h = Harness(HarnessConfig(tools={"set_config": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel(stuck)
    agent = make_agent(model, [run_job, set_config], middlewares=h.middlewares(), max_iters=40)
    h.instrument(agent.toolkit)
    await run(agent, "deploy the build")
    report = h.last_report(agent)
    assert len(RUNS) <= RUNS_AT_MOST.get(kind, 3), (
        f"the doomed job ran {len(RUNS)} times, failing each time in the same words but for {RUNS}; "
        f"report {report.terminal_state.value}/{report.reason}, refusals {report.refusals}")

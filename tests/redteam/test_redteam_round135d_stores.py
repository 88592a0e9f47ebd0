"""Round 135 d (scenarios, from a user's side): the stores, README "Running many
workers" and the CLI. A Redis user that does not exist stands for credentials
rotated under the fleet: its password must never reach the model, the report, the
caller's stream or a log; a store that can never answer is refused at construction;
`check-config` never prints a declared secret, in its own field or quoted in another."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    Principal,
    RateLimit,
    RedisStore,
    SQLiteStore,
)
from tests.scripted import ALLOW, ScriptedModel, calls, make_agent, redis_url, run, text

PASSWORD = "Sup3rS3cretPw-9f2k"
ALICE = Principal(user_id="u-42", tenant="acme")


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q}"


async def _run_against_a_store_refusing_its_credentials(**limits: Any) -> tuple[Any, list[Any], Any]:
    # the real server; no such user there
    store = RedisStore(redis_url().replace("redis://", f"redis://svc:{PASSWORD}@", 1), timeout_s=1.0)
    h = Harness(HarnessConfig(store=store, **limits), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(search, permission=ALLOW)]))
    model = ScriptedModel([calls(("search", {"q": "a"})), text("done")])
    agent = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "find a")
    return model, events, h.last_report(agent)


@pytest.mark.parametrize("limits", [
    {"rate_limits": [RateLimit(scope="tool", tool="search", calls_per_min=5)]},
    {"concurrency_limits": [ConcurrencyLimit(scope="tool", tool="search", max_in_flight=2)]},
], ids=["rate_limit", "concurrency_limit"])
async def test_the_redis_password_is_never_sent_to_the_model(limits):
    """Promise (README "What fails closed"): a store that does not answer makes
    limits refuse with ``dependency_down``: "the user is told a service it
    needs is unavailable". Security: the harness redacts secrets from what
    the model reads and from decision details.

    Attack: the fleet's Redis password is rotated (or mistyped) under a
    running worker; a limited tool is called.

    What happened: the tool result the model reads is
    ``[harness:dependency_down] search cannot be checked against its limits:
    Redis store redis://svc:<PASSWORD>@127.0.0.1:6399/7 is unavailable ...``:
    the harness's own store credential goes to the LLM provider, a third
    party (``RedisStore._what``, now ``told``, was the raw URL, put into every
    ``DependencyDown``)."""
    model, _, _ = await _run_against_a_store_refusing_its_credentials(**limits)
    told = json.dumps([call["formatted"] for call in model.calls], default=str)
    assert "[harness:dependency_down]" in told  # the limit failed closed, as promised
    assert PASSWORD not in told, model.calls[-1].last_result


@pytest.mark.parametrize("limits", [
    {"rate_limits": [RateLimit(scope="tool", tool="search", calls_per_min=5)]},
    {"cost": CostPolicy(prices={"scripted": (1.0, 1.0)}, daily_quota_usd=5.0),
     "concurrency_limits": [ConcurrencyLimit(scope="principal", max_in_flight=1)]},
    {"breaker_failures": 2},
], ids=["tool_limit", "run_limit", "breaker_fallback"])
async def test_the_redis_password_is_not_in_the_report_nor_the_callers_stream(limits):
    """Promise (README Security, ``record_raw``): decision details and the
    report's reason are redacted; the report is what ``on_report`` ships to
    your log pipeline and ``harness.decision`` events go to the caller (a
    UI). ``check-config`` itself prints the store as ``<RedisStore>``.

    Attack: as above, the store refuses its credentials; a run with a tool
    limit, a run limit (the run stops at its open), or no limit at all (the
    breaker falls back to this process's state, ``breaker_fallback``).

    What happened: the decision detail (``fleet stop ... Redis store
    redis://svc:<PASSWORD>@...``, ``breaker_fallback``'s detail) carries
    the URL with its password, in ``RunReport.decisions`` and in the
    ``harness.decision`` events the caller receives."""
    _, events, report = await _run_against_a_store_refusing_its_credentials(**limits)
    streamed = json.dumps([getattr(e, "value", None) for e in events
                           if getattr(e, "name", "") in ("harness.decision", "harness.report")], default=str)
    assert PASSWORD not in report.model_dump_json(), [d.detail for d in report.decisions]
    assert PASSWORD not in streamed


# ------------------------------------------------------------ construction


@pytest.mark.parametrize("make", [
    lambda: RedisStore("http://127.0.0.1:6399/7"),
    lambda: SQLiteStore(":memory:"),
], ids=["redis_http_scheme", "sqlite_memory"])
def test_a_store_that_can_never_answer_is_refused_at_construction(make):
    """Promise (README Configuration): invalid values fail at construction
    with the field named; "a config that would silently disable a limit is
    invalid too"; a store's settings are refused at construction
    (``ValueError`` naming the setting).

    Attack: ``RedisStore("http://...")`` (a scheme redis-py never accepts)
    and ``SQLiteStore(":memory:")`` (the store opens a connection per call:
    every call meets a new, empty database).

    What happened: both are built without a word; every later call fails
    (``ValueError: Redis URL must specify one of the following schemes`` /
    ``no such table: harness_spend``), so every run with a quota or a limit
    ends ``dependency_down`` for ever, and operators are told a service is
    down rather than that the store was configured wrong."""
    with pytest.raises(ValueError, match="url must be a redis|path must name a database file"):
        make()


# --------------------------------------------------------------------- CLI


def test_check_config_never_prints_a_declared_secret_value(tmp_path: Path):
    """Promise (README "Use it", the command line): ``check-config`` prints
    the effective config "secret values as placeholders".

    Attack: a policy whose ``secret_values`` holds the support desk's
    token, which its ``model_error_text`` also quotes (an operator's text).

    What happened: ``secret_values`` prints as ``["<secret>"]`` but the
    same value is printed in clear under ``model_error_text`` (and
    ``fallback_text``, a ``claims`` pattern), in the terminal and the CI
    log. At run time the harness redacts it from the answer; the CLI does
    not."""
    secret = "desk-token-7Hq2Zx9Lp4"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f'secret_values: ["{secret}"]\n'
        f'model_error_text: "The assistant is unavailable; quote {secret} to the desk."\n',
        encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "agentscope_harness", "check-config", str(policy)],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr, done.stdout

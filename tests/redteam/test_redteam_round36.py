"""Red team, round 36: the round-35 fixes, attacked from the user's side.

1. progress (``facts._VOLATILE_SPAN``: a date or time is never read after
   ``:``, ``-`` or ``_``; a UUID may follow them; durations only after
   ``:``; ``1m17s`` and ``17msec`` are volatile): noise of the common log
   formats still read as news (an access log's ``[03/Dec/2026:10:11:12
   +0000]``, whose time follows ``:``; Go's ``1h2m3s``), and the noise the
   pattern does leave out (Python logging, ``[10:11:12]``, ``t=0.53s``,
   ``elapsed: 00:01:23``, ``took 250 ms``, an HTTP ``Date:``); new
   information now lost (a decade ``1950s`` or a model ``iPhone 6s`` read as
   a duration) and kept (``sku_12s``, ``12:30``, phone numbers, versions, a
   backup named by its timestamp);
2. the drift ladder after "a stall after progress gets its own hint":
   a run alternating progress and nothing new is never hinted; a second
   stall is still constrained and stopped; two tools alternated over an
   access log's tail, end to end through AgentScope's real
   ``OpenAIChatModel`` and the scripted server.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel
from hookkit import drive
from pydantic import SecretStr
from scripted import make_agent, run
from server import FakeOpenAI, Reply
from test_redteam_round35 import _fresh, _report, _statuses

from agentscope_harness import Harness, HarnessConfig, TerminalState

# ============================================================== 1. progress

QUIET = "Health check: service api, replicas ready, queue empty, no alerts raised."


def _clf(i: int) -> str:
    """nginx/Apache's default access-log line (``combined``): the probe's own
    request, only its timestamp new."""
    return (f'{QUIET} Last request: 10.0.0.7 - - [03/Dec/2026:10:{11 + i // 60:02d}:{i % 60:02d} +0000] '
            '"GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"')


def _haproxy(i: int) -> str:
    return (f"{QUIET} Last request: haproxy[812]: 10.0.0.7:51000 [03/Dec/2026:10:11:{i:02d}.120] "
            'fe_http be_api/srv1 0/0/1/2/3 200 512 - - ---- 1/1/0/0/0 0/0 "GET /healthz HTTP/1.1"')


def _go_elapsed(i: int) -> str:
    """Go's ``time.Duration.String()`` of a job past its first hour."""
    return f"Job build-42: running for 1h2m{10 + i}s, step compile, no errors, waiting on tests."


@pytest.mark.parametrize("render", [_clf, _haproxy], ids=["nginx_combined", "haproxy"])
async def test_an_access_log_timestamp_is_no_progress(render: Any) -> None:
    report = await _report(render)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "stalled"), report.reason


async def test_go_elapsed_time_over_an_hour_is_no_progress() -> None:
    report = await _report(_go_elapsed)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "stalled"), report.reason


LOG_NOISE = {
    "python_logging": lambda i: f"2024-05-01 10:11:{i:02d},{i * 7:03d} INFO worker: {QUIET}",
    "bracketed_time": lambda i: f"[10:11:{i:02d}] INFO {QUIET}",
    "logfmt_t": lambda i: f"{QUIET} t=0.{i + 10}s",
    "duration_eq": lambda i: f"{QUIET} duration={i}.{i + 3}s",
    "elapsed_colon_space": lambda i: f"{QUIET} elapsed: 00:01:{i:02d}",
    "took_ms": lambda i: f"{QUIET} took {200 + i} ms",
    "http_date": lambda i: f"HTTP/1.1 200 OK Date: Tue, 03 Dec 2026 10:11:{i:02d} GMT {QUIET}",
    "msec": lambda i: f"{QUIET} poll {17 + i}msec",
    "time_real": lambda i: f"{QUIET} real 0m{i}.{i + 100}s user 0m0.01s",
    "iso_after_eq": lambda i: f"{QUIET} ts=2024-05-01T10:11:{i:02d}.{i}Z",
}


@pytest.mark.parametrize("render", list(LOG_NOISE.values()), ids=list(LOG_NOISE))
async def test_common_log_noise_is_no_progress(render: Any) -> None:
    """Regression guard: a health poll whose only change is the noise of a
    common log format is stalled."""
    report = await _report(render)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "stalled"), report.reason


def _decade(i: int) -> str:
    return f"Archive box catalogued: newspapers from the {1890 + 10 * i}s, condition good, shelf A."


def _model(i: int) -> str:
    return f"Refurbished stock found: Apple iPhone {i + 2}s, 64 GB, silver, grade A, ships today."


@pytest.mark.parametrize("render", [
    _decade,
    pytest.param(_model, marks=pytest.mark.xfail(strict=True, reason=(
        "a limit the README states (hook #20: a number with a bare 's' after it reads as seconds, "
        "a decade aside): 'iPhone 6s' is taken for a duration, so a catalogue scan finding a new "
        "model each round is stalled (facts._VOLATILE_SPAN)"))),
], ids=["decade", "iphone_model"])
async def test_a_decade_or_a_model_name_is_news(render: Any) -> None:
    report = await _report(render, n=10)
    assert report.terminal_state == TerminalState.COMPLETED, report.reason


NEWS = {
    "sku_underscore_s": lambda i: f"Item found: sku_{i + 10}s, colour red, in stock.",
    "slot_hh_mm": lambda i: f"Free slot found: {9 + i}:30 with Dr Lee, room 4.",
    "phone": lambda i: f"Contact found: support line 555-{100 + i}-{4000 + i * 7}, open weekdays.",
    "version": lambda i: f"Release found: agentscope 2.{i}.{i + 1}, status stable.",
    "item_dash_s": lambda i: f"Part found: bolt-{i + 10}s, zinc, pack of ten.",
    "snapshot_name": lambda i: f"Latest snapshot: db-2024-05-{i:02d}T10:11:12Z, size 4 GB.",
    "mac_dashes": lambda i: f"New device: mac 00-50-56-{10 + i}:{20 + i}:{30 + i}, state up.",
}


@pytest.mark.parametrize("render", list(NEWS.values()), ids=list(NEWS))
async def test_new_values_near_volatile_shapes_are_progress(render: Any) -> None:
    """Regression guard: each round's only news is a value shaped like a
    volatile token but not one (or one after ``-``/``_``): never stalled."""
    report = await _report(render, n=10)
    assert report.terminal_state == TerminalState.COMPLETED, report.reason
    assert not [d for d in report.decisions if d.hook == "drift_detector"]


# ================================================================ 2. ladder


async def test_alternating_progress_and_nothing_new_is_never_hinted() -> None:
    """Regression guard: news every other round for 16 rounds (default
    ``stall_rounds``): no drift hint, completed."""
    reports, (model, agent) = _statuses(
        lambda i: _fresh(i) if i % 2 else "Nothing changed.", n=16,
        config=HarnessConfig(max_model_calls=30))
    await run(agent, "watch")
    told = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    assert reports[0].terminal_state == TerminalState.COMPLETED, reports[0].reason
    assert "Change approach" not in told and "going round in circles" not in told


async def test_a_stall_after_progress_still_climbs_to_the_stop() -> None:
    """Regression guard: news in rounds 1 and 6 (the first stall hinted
    before it), then nothing: hinted once more, constrained, stopped within
    2 * stall_rounds + 2 calls of the last news."""
    fresh = {1, 6}
    reports, (model, agent) = _statuses(
        lambda i: _fresh(i) if i in fresh else "Nothing changed.", n=30,
        config=HarnessConfig(max_model_calls=40))
    await run(agent, "watch")
    told = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    assert reports[0].reason == "stalled"
    assert len(model.calls) <= 6 + 2 * 3 + 2, len(model.calls)
    assert told.count("Change approach") == 2 and told.count("Conclude now with what you have") == 1


# --------------------------------------------------- end to end, real client


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    """AgentScope's real ``OpenAIChatModel`` pointed at the scripted server
    (both retry loops off); clients closed on the test's loop."""
    made: list[OpenAIChatModel] = []

    def make(srv: FakeOpenAI) -> OpenAIChatModel:
        m = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=srv.base_url),
            model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
            client_kwargs={"max_retries": 0, "timeout": 30.0},
        )
        made.append(m)
        return m

    yield make
    for m in made:
        await m.client.close()


REQUESTS = ("GET /api/orders 200 512", "GET /api/cart 200 128", "POST /api/login 302 0",
            "GET /static/app.js 304 0", "GET /healthz 200 2")


def _iso_tail(i: int) -> str:
    """The same five requests, each line stamped (ISO 8601)."""
    return "\n".join(f"2026-12-03T10:{i:02d}:{j:02d}Z 10.0.0.7 {r}" for j, r in enumerate(REQUESTS))


def _clf_tail(i: int) -> str:
    """The same five requests in nginx's default access-log format."""
    return "\n".join(f'10.0.0.7 - - [03/Dec/2026:10:{i:02d}:{j:02d} +0000] "{r[:-6]} HTTP/1.1" {r[-5:]}'
                     for j, r in enumerate(REQUESTS))


@pytest.mark.parametrize("render", [
    _iso_tail,
    _clf_tail,
], ids=["iso_timestamp", "access_log_timestamp"])
async def test_two_log_tools_alternated_are_stopped_through_the_real_client(
    server: FakeOpenAI, make_model: Any, render: Any,
) -> None:
    n = iter(range(1, 1000))

    async def tail_app_log(page: int) -> str:
        """Tail the app log.

        Args:
            page (int): The page.
        """
        return "app log: " + render(next(n))

    async def tail_proxy_log(page: int) -> str:
        """Tail the proxy log.

        Args:
            page (int): The page.
        """
        return "proxy log: " + render(next(n))

    h = Harness(HarnessConfig(max_model_calls=30), load_entry_points=False)
    agent = make_agent(make_model(server), [tail_app_log, tail_proxy_log], middlewares=h.middlewares())
    server.plan(*[Reply(tool_calls=[(("tail_app_log", "tail_proxy_log")[i % 2], {"page": 100 + i})])
                  for i in range(24)])
    _, _, report = await drive(h, agent)
    assert report.terminal_state == TerminalState.INCOMPLETE and report.reason in ("stalled", "cycling")
    assert len(server.requests) <= 8, len(server.requests)

"""Run AgentScope's own test-suite twice, bare and with the harness injected
into every ``Agent``, and compare the outcome of each test.

Usage::

    python tests/transparency/run_agentscope_suite.py /path/to/agentscope/tests
    python tests/transparency/run_agentscope_suite.py /path/to/tests --order both --explain -q
    python tests/transparency/run_agentscope_suite.py /path/to/tests --json out.json
    python tests/transparency/run_agentscope_suite.py /path/to/tests --files agent_basic_test.py

The tests folder is AgentScope's (``git archive <rev> tests`` of the upstream
repository); nothing of it is copied into this repository. The runner copies
it to a temporary directory, so the folder you pass is never modified.

How the harness is injected
---------------------------
This module is also the pytest plugin (``-p run_agentscope_suite``) loaded
into both child runs:

* ``HARNESS_SUITE_OUTCOMES=<file>``: record each test's outcome (passed /
  failed / error / skipped), where it failed (``path:line``), how many
  ``Agent`` objects it built and which harness decisions were taken.
* ``HARNESS_SUITE_INJECT=app-first|harness-first``: patch
  ``agentscope.agent.Agent.__init__`` so that every agent (subclasses
  included) gets ``Harness().middlewares()`` (a fresh default
  ``HarnessConfig()`` per agent) added to its ``middlewares`` argument.

Order. ``app-first`` (the default) keeps the agent's own middlewares first,
i.e. outermost, and appends the two harness adapters innermost, next to
AgentScope's core. The application's middlewares keep the place they were
written for (their ``on_reply`` wraps the whole reply, their short-circuits,
swallowed end events, forced ``tool_choice`` and model swaps happen before
the harness sees the call), and the harness gates exactly what AgentScope
is about to execute: it does not override a ``tool_choice`` an outer
middleware forced, prices the model an outer router chose, and its refusals
sit right before the tool. The cost: what the harness adds (its
``CustomEvent``s, fenced tool results) is visible to the outer middlewares.
``harness-first`` puts the adapters outermost (``harness.middlewares() +
mine``): the application's middlewares then see the core exactly as bare,
which is one fewer difference in AgentScope's suite (an ``on_reply``
middleware that records every event), but the harness then judges and
prices what the inner middlewares may still change. ``--order both`` runs
both; docs/TRANSPARENCY.md has the figures.

``--explain`` re-runs the harnessed suite with the intended additions of a
default harness neutralised (each alone, in pairs, all together), through
three more variables the plugin reads: ``HARNESS_SUITE_CONFIG`` (JSON for
``Harness(config)``: no system-prompt rules, no fence),
``HARNESS_SUITE_HIDE_EVENTS=1`` (a middleware right outside the adapters
drops ``harness.*`` CustomEvents) and ``HARNESS_SUITE_RAW_STREAM=1`` (no
stream redaction: text deltas pass as streamed). Each difference is
attributed to the smallest set that makes the test behave as bare again;
one that no set explains is printed as UNEXPLAINED.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLUGIN = Path(__file__).stem  # this module, loaded with ``-p``

#: AgentScope test files about agent behaviour that run without optional
#: services (no Redis, Docker, API keys or apscheduler).
DEFAULT_FILES = [
    "agent_basic_test.py",
    "agent_injection_test.py",
    "agent_interrupt_test.py",
    "agent_structured_output_test.py",
    "compress_context_test.py",
    "compress_tool_result_test.py",
    "hitl_user_confirmation_test.py",
    "hitl_external_execution_test.py",
    "hitl_mixed_test.py",
    "middleware_test.py",
    "middleware_budget_test.py",
    "tool_middleware_test.py",
    "middleware_filesystem_memory_test.py",
    "mem0_middleware_test.py",
    "reme_middleware_test.py",
    "tracing_test.py",
]

ORDERS = ("app-first", "harness-first")

# =====================================================================
# pytest plugin side (runs inside the child pytest processes)
# =====================================================================

_CURRENT: dict[str, Any] = {"nodeid": None}
_PER_TEST: dict[str, dict[str, Any]] = {}


def _slot(nodeid: str) -> dict[str, Any]:
    return _PER_TEST.setdefault(
        nodeid,
        {"outcome": "passed", "where": None, "message": None,
         "agents": 0, "harnessed": 0, "harnesses": [], "decisions": []},
    )


def install_injection(order: str = "app-first") -> None:
    """Patch ``Agent.__init__`` so every agent gets ``Harness().middlewares()``."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    from agentscope.agent import Agent

    from agentscope_harness import Harness

    original = Agent.__init__
    if getattr(original, "_harness_injected", False):
        return
    signature = inspect.signature(original)
    config = json.loads(os.environ.get("HARNESS_SUITE_CONFIG") or "null")
    hide = os.environ.get("HARNESS_SUITE_HIDE_EVENTS") == "1"
    raw_stream = os.environ.get("HARNESS_SUITE_RAW_STREAM") == "1"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        own = list(bound.arguments.get("middlewares") or [])
        harness = Harness(config)
        if raw_stream:  # --explain only: text deltas pass as the model streamed them
            harness.stream_redaction = False
        added = harness.middlewares()
        if hide:
            added = [_hide_harness_events(), *added]
        bound.arguments["middlewares"] = own + added if order == "app-first" else added + own
        nodeid = _CURRENT["nodeid"]
        if nodeid is not None:
            slot = _slot(nodeid)
            slot["agents"] += 1
            slot["harnessed"] += 1
            slot["harnesses"].append(harness)
        original(*bound.args, **bound.kwargs)

    __init__._harness_injected = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    Agent.__init__ = __init__  # type: ignore[method-assign]


def _hide_harness_events() -> Any:
    """A middleware placed right outside the harness adapters that drops the
    harness's own ``CustomEvent``s (``harness.decision``/``harness.report``),
    used by ``--explain`` to tell that addition apart from everything else."""
    from agentscope.event import CustomEvent
    from agentscope.middleware import MiddlewareBase

    def hidden(item: Any) -> bool:
        return isinstance(item, CustomEvent) and str(item.name).startswith("harness.")

    class HideHarnessEvents(MiddlewareBase):
        async def get_middleware_key(self) -> str:
            return "transparency.hide_harness_events"

        async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            async for item in next_handler(**input_kwargs):
                if not hidden(item):
                    yield item

        async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            async for item in next_handler(**input_kwargs):
                if not hidden(item):
                    yield item

    return HideHarnessEvents()


def _count_bare_agents() -> None:
    from agentscope.agent import Agent

    original = Agent.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nodeid = _CURRENT["nodeid"]
        if nodeid is not None:
            _slot(nodeid)["agents"] += 1
        original(self, *args, **kwargs)

    Agent.__init__ = __init__  # type: ignore[method-assign]


def pytest_configure(config: Any) -> None:
    """Install the injection (or just the agent counter) once per session."""
    order = os.environ.get("HARNESS_SUITE_INJECT")
    if order:
        install_injection(order)
    elif os.environ.get("HARNESS_SUITE_OUTCOMES"):
        _count_bare_agents()


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """Attribute the agents built from here on to this test."""
    _CURRENT["nodeid"] = nodeid
    _slot(nodeid)


def pytest_runtest_logreport(report: Any) -> None:
    """Fold setup/call/teardown into one outcome per test."""
    slot = _slot(report.nodeid)
    if report.when == "call" and report.skipped and slot["outcome"] == "passed":
        slot["outcome"] = "skipped"
    elif report.when == "setup" and report.skipped:
        slot["outcome"] = "skipped"
    if report.failed and slot["outcome"] in ("passed", "skipped"):
        slot["outcome"] = "failed" if report.when == "call" else "error"
        crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
        if crash is not None:
            slot["where"] = f"{Path(crash.path).name}:{crash.lineno}"
            slot["message"] = (crash.message or "").splitlines()[0][:300] if crash.message else ""
        else:
            slot["message"] = str(report.longrepr).splitlines()[-1][:300] if report.longrepr else ""
    if report.when == "teardown":
        _collect_decisions(slot)


def pytest_collectreport(report: Any) -> None:
    """A file that cannot even be collected counts as one errored entry."""
    if report.failed:
        slot = _slot(f"{report.nodeid}::<collection>")
        slot["outcome"] = "error"
        slot["message"] = str(report.longrepr).strip().splitlines()[-1][:300]


def _collect_decisions(slot: dict[str, Any]) -> None:
    for harness in slot.pop("harnesses", []):
        for report in list(harness.reports):
            slot["decisions"].extend(
                f"{d.hook}:{d.action}:{d.code or ''}" for d in report.decisions
            )
            slot.setdefault("terminal", []).append(
                f"{report.terminal_state.value}:{report.reason}",
            )
    slot["harnesses"] = []


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Write the outcomes for the parent runner."""
    path = os.environ.get("HARNESS_SUITE_OUTCOMES")
    if not path:
        return
    out = {}
    for nodeid, slot in _PER_TEST.items():
        _collect_decisions(slot)
        out[nodeid] = {k: v for k, v in slot.items() if k != "harnesses"}
    Path(path).write_text(json.dumps(out, indent=1, sort_keys=True))


# =====================================================================
# runner side
# =====================================================================


def prepare_copy(tests_dir: Path, work: Path) -> Path:
    """Copy AgentScope's tests folder; make ``utils.py`` importable without
    the optional ``apscheduler`` (its ``WorkspaceManagerBase`` import and the
    ``FakeWorkspaceManager`` helper that needs it are dropped, only used by
    the team-tool tests)."""
    dest = work / "tests"
    shutil.copytree(tests_dir, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    utils = dest / "utils.py"
    if utils.exists():
        if importlib.util.find_spec("apscheduler") is None:  # optional dependency
            text = utils.read_text()
            text = text.replace(
                "from agentscope.app.workspace_manager import WorkspaceManagerBase\n", "",
            )
            cut = text.find("class FakeWorkspaceManager(")
            if cut != -1:
                text = text[:cut]
            utils.write_text(text)
    return dest


#: ``--explain``: the intended additions of a default harness, each of which
#: can be neutralised on its own: the rules appended to the system prompt,
#: the content fence around tool results, the harness's CustomEvents, and
#: the re-chunking of streamed text by the stream redactor.
KNOBS = ("prompt-rules", "fence", "events", "stream-redaction")


def variant(knobs: tuple[str, ...]) -> dict[str, str]:
    """The child-process environment that neutralises ``knobs``."""
    config: dict[str, Any] = {}
    if "prompt-rules" in knobs:
        config["disabled_hooks"] = ["system_prompt_append"]
    if "fence" in knobs:
        config["fence"] = False
    env = {"HARNESS_SUITE_CONFIG": json.dumps(config)} if config else {}
    if "events" in knobs:
        env["HARNESS_SUITE_HIDE_EVENTS"] = "1"
    if "stream-redaction" in knobs:
        env["HARNESS_SUITE_RAW_STREAM"] = "1"
    return env


def run_pytest(
    copy: Path, files: list[str], outcomes: Path, inject: str | None,
    extra: list[str] | None = None, timeout: float = 1800,
    knob_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One child pytest run; returns the recorded outcomes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(HERE), str(copy), env.get("PYTHONPATH", "")] if p
    )
    env["HARNESS_SUITE_OUTCOMES"] = str(outcomes)
    env.pop("HARNESS_SUITE_INJECT", None)
    for name in list(env):  # the developer's incident switches stay out
        if name.startswith("HARNESS_") and not name.startswith("HARNESS_SUITE_"):
            env.pop(name)
    if inject:
        env["HARNESS_SUITE_INJECT"] = inject
        env.update(knob_env or {})
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
        "--rootdir", str(copy), *files, *(extra or []),
    ]
    proc = subprocess.run(
        cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout,
    )
    if not outcomes.exists():
        raise RuntimeError(
            f"pytest wrote no outcomes (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}",
        )
    return json.loads(outcomes.read_text())


_VOLATILE = [  # ids, nonces and clocks differ from run to run
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+"), "<time>"),
    (re.compile(r"\b[0-9a-f]{12,32}\b"), "<id>"),
    (re.compile(r"0x[0-9a-f]+"), "<addr>"),
]


def _normalised(message: str | None) -> str:
    text = message or ""
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text


def same_as_bare(b: dict[str, Any], h: dict[str, Any]) -> bool:
    """Same outcome; and two failures only when at the same line with the
    same message (ids and clocks aside)."""
    if b.get("outcome") != h.get("outcome"):
        return False
    return b["outcome"] in ("passed", "skipped") or (
        b.get("where") == h.get("where")
        and _normalised(b.get("message")) == _normalised(h.get("message"))
    )


def compare(bare: dict[str, Any], harnessed: dict[str, Any]) -> dict[str, Any]:
    """Per-test comparison of two runs."""
    rows = []
    for nodeid in sorted(set(bare) | set(harnessed)):
        b = bare.get(nodeid, {"outcome": "missing"})
        h = harnessed.get(nodeid, {"outcome": "missing"})
        same_outcome = b["outcome"] == h["outcome"]
        same_failure = same_as_bare(b, h)
        rows.append({
            "test": nodeid,
            "bare": b["outcome"],
            "harnessed": h["outcome"],
            "differs": not same_outcome,
            "fails_differently": same_outcome and not same_failure,
            "bare_where": b.get("where"),
            "bare_message": b.get("message"),
            "harnessed_where": h.get("where"),
            "harnessed_message": h.get("message"),
            "agents": h.get("harnessed", 0),
            "decisions": h.get("decisions", []),
            "terminal": h.get("terminal", []),
        })
    passed = lambda run: sum(1 for v in run.values() if v["outcome"] == "passed")  # noqa: E731
    return {
        "tests": len(rows),
        "pass_bare": passed(bare),
        "pass_harnessed": passed(harnessed),
        "with_agents": sum(1 for r in rows if r["agents"]),
        "differences": [r for r in rows if r["differs"]],
        "fails_differently": [r for r in rows if r["fails_differently"]],
        "rows": rows,
    }


def print_report(order: str, result: dict[str, Any], verbose: bool) -> None:
    """Human-readable comparison."""
    print(f"\n=== harness order: {order} ===")
    if verbose:
        width = max((len(r["test"]) for r in result["rows"]), default=10)
        print(f"{'test':<{width}}  {'bare':<8} {'harnessed':<9} agents")
        for r in result["rows"]:
            mark = " <-- differs" if r["differs"] else (
                " <-- fails differently" if r["fails_differently"] else "")
            print(f"{r['test']:<{width}}  {r['bare']:<8} {r['harnessed']:<9} {r['agents']}{mark}")
    print(
        f"tests: {result['tests']}  passed bare: {result['pass_bare']}  "
        f"passed harnessed: {result['pass_harnessed']}  "
        f"tests that built an Agent: {result['with_agents']}  "
        f"differences: {len(result['differences'])}  "
        f"same outcome, failing differently: {len(result['fails_differently'])}",
    )
    for title, rows in (("differences", result["differences"]),
                        ("failing differently (line or message)", result["fails_differently"])):
        if not rows:
            continue
        print(f"-- {title}:")
        for r in rows:
            print(f"  {r['test']}: bare={r['bare']} harnessed={r['harnessed']}")
            if r["harnessed_where"] or r["harnessed_message"]:
                print(f"      at {r['harnessed_where']}: {r['harnessed_message']}")
            if r["bare_where"]:
                print(f"      bare failed at {r['bare_where']}: {r['bare_message']}")
            if r["decisions"]:
                print(f"      harness decisions: {sorted(set(r['decisions']))}")


def explain(
    copy: Path, files: list[str], work: Path, order: str, extra: list[str],
    bare: dict[str, Any], result: dict[str, Any],
) -> dict[str, str]:
    """Re-run the harnessed suite with every combination of intended
    additions neutralised; a difference is explained by the smallest
    combinations under which the test behaves as bare. What still differs
    with all of them neutralised is unexplained (a harness bug to chase)."""
    from itertools import combinations

    differing = [r["test"] for r in result["differences"] + result["fails_differently"]]
    passing: dict[str, list[tuple[str, ...]]] = {t: [] for t in differing}
    residual: dict[str, dict[str, Any]] = {}
    # single knobs, pairs, and all of them at once
    sets = [k for size in (1, 2) for k in combinations(KNOBS, size)] + [KNOBS]
    for knobs in sets:
        out = run_pytest(
            copy, files, work / f"{order}-{'+'.join(knobs)}.json", order, extra,
            knob_env=variant(knobs),
        )
        for test in differing:
            if same_as_bare(bare[test], out.get(test, {})):
                passing[test].append(knobs)
            elif knobs == KNOBS:
                residual[test] = out.get(test, {})
        # neutralising must not create differences of its own
        new = [t for t in bare if t not in passing
               and not same_as_bare(bare[t], out.get(t, {}))]
        if new:
            print(f"  ! with {'+'.join(knobs)} neutralised, new differences: {new}")
    causes: dict[str, str] = {}
    print(f"-- attribution ({order}): what has to be neutralised for the test to behave as bare")
    for test, found in passing.items():
        minimal = [k for k in found if not any(set(o) < set(k) for o in found)]
        causes[test] = " | ".join("+".join(k) for k in minimal) if minimal else "UNEXPLAINED"
        print(f"  {test}: {causes[test]}")
        if test in residual:
            r = residual[test]
            print(f"      still {r.get('outcome')} at {r.get('where')}: {r.get('message')}")
    return causes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests_dir", type=Path, help="AgentScope's tests/ folder")
    parser.add_argument("--files", nargs="*", default=None,
                        help=f"test files to run (default: {len(DEFAULT_FILES)} agent suites)")
    parser.add_argument("--order", choices=[*ORDERS, "both"], default="app-first")
    parser.add_argument("--json", type=Path, default=None, help="write the comparison here")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-test table")
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--explain", action="store_true",
                        help="re-run the harnessed suite with the intended additions "
                             f"({', '.join(KNOBS)}) neutralised to attribute every difference")
    args = parser.parse_args(argv)

    tests_dir = args.tests_dir.resolve()
    files = args.files or [f for f in DEFAULT_FILES if (tests_dir / f).exists()]
    extra = ["-k", args.k] if args.k else []
    orders = list(ORDERS) if args.order == "both" else [args.order]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="as_suite_") as tmp:
        work = Path(tmp)
        copy = prepare_copy(tests_dir, work)
        bare = run_pytest(copy, files, work / "bare.json", None, extra)
        for order in orders:
            harnessed = run_pytest(copy, files, work / f"{order}.json", order, extra)
            results[order] = compare(bare, harnessed)
            print_report(order, results[order], verbose=not args.quiet)
            if args.explain and results[order]["differences"]:
                results[order]["explained"] = explain(
                    copy, files, work, order, extra, bare, results[order],
                )
    if args.json:
        args.json.write_text(json.dumps({"files": files, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

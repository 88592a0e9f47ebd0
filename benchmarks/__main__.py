"""``python -m benchmarks [--quick] [--only overhead,tokens,...] [--no-write]``"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from . import MODULES
from ._report import Section, console_line, markdown

RESULTS = Path(__file__).with_name("RESULTS.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (seconds; numbers are noisy)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(MODULES)}")
    parser.add_argument("--no-write", action="store_true",
                        help=f"do not write {RESULTS.name} (--quick never writes it)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MODULES)
    unknown = sorted(set(names) - set(MODULES))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(MODULES)}")
    size = "quick" if args.quick else "full"
    # AgentScope logs a warning per stopped stubborn run; the figures say it.
    # (The harnesses are built with environ={}: HARNESS_* flags do not apply.)
    logging.disable(logging.WARNING)
    try:
        # quick sizes are for checking the benchmarks run, never for the record
        return _run(names, size, write=not args.no_write and size == "full")
    finally:
        logging.disable(logging.NOTSET)


def _run(names: list[str], size: str, write: bool) -> int:
    sections: list[Section] = []
    started = time.perf_counter()
    print(f"agentscope-harness benchmarks ({size}): harnessed vs bare AgentScope, same run\n")
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        t0 = time.perf_counter()
        section = asyncio.run(module.run(size))
        sections.append(section)
        print(f"{section.title}  [{time.perf_counter() - t0:.1f} s]")
        for figure in section.figures:
            print(console_line(figure))
        for line in section.details:
            print(line)
        if section.table and name == "scale":
            print("  " + " | ".join(section.table_head))
            for row in section.table:
                print("  " + " | ".join(row))
        print()
    missed = [f for s in sections for f in s.figures if f.met is False]
    print(f"done in {time.perf_counter() - started:.0f} s; goals missed: {len(missed)}")
    for f in missed:
        print(f"  MISSED {f.bench}: {f.name}")

    if write:
        RESULTS.write_text(markdown(sections, _header(size, names), NOTES), encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


NOTES = """
### How the figures are made

- **overhead**: the same 20-round reply (tool rounds cycling an identity-bound lookup, a
  retrieval with a ledger and a retrieval with a prerequisite, then the finishing tool and
  the answer) on a bare agent and on an agent with the full policy (roles, ledgers, prices
  and a USD cap, a deadline, call caps, pruning, `harness.instrument(toolkit)`, every
  built-in hook on; nothing is refused: the run is checked). Wall time per round, median
  of interleaved repetitions. *null middlewares* is AgentScope's own cost of two
  pass-through middlewares on the same hooks the harness implements: the floor any
  middleware-based harness pays. *machinery only (no hooks)* is the same harness with
  every hook disabled: its adapters, run lifecycle, model guard, prefix observer, output
  filters and reports, apart from what the hooks decide.
- **tokens**: input tokens are counted from the payload the model receives (formatted
  messages plus tool schemas, `len(json) / 4`); the run uses `result_max_tokens=1000`,
  `prune_over_tokens=16000`, `keep_last=2`.
- **prefix / cache**: a break is a call whose messages do not start with the previous
  call's messages, byte for byte. Cached tokens = the longest common prefix (tool schemas
  first, then messages) with the previous payload; *effective* prices a cached token at
  0.1 of an uncached one. The message list never breaks on a tier change, but a provider
  keeps one cache per model, so the first call after a tier change is a cache miss there;
  the conclude constraint changes `tool_choice` (counted in the console output), which
  some providers also key their cache on.
- **termination**: AgentScope's default `ReActConfig` (50 iterations) on both sides.
- **scale**: *dispatch* is the hook runner alone (built-ins off) running one round's four
  points; *agent* is the overhead agent with the custom no-op hooks added.
"""


def _header(size: str, names: list[str]) -> str:
    import agentscope

    import agentscope_harness

    try:
        load = ", load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:  # pragma: no cover
        load = ""
    command = "python -m benchmarks" + (" --quick" if size == "quick" else "")
    if len(names) != len(MODULES):
        command += f" --only {','.join(names)}"
    return (
        "# Benchmark results\n\n"
        f"Latest run of `{command}` (from the repository root), "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: agentscope-harness "
        f"{agentscope_harness.__version__}, agentscope {agentscope.__version__}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs{load}.\n\n"
        "Harnessed and bare agents run side by side in the same process, on a "
        "zero-latency scripted model and trivial async tools. Ratios are harnessed / bare."
    )


if __name__ == "__main__":
    sys.exit(main())

"""Instructions per round, counted, not timed: the overhead benchmark's
reply, bare and harnessed, under valgrind's callgrind in one process.

``python -m benchmarks.instructions [--replies N] [--cache]`` (needs
``valgrind``; several minutes). Wall and CPU times on a shared machine move
by a third between runs; an instruction count is the same in every run, so a
change of a percent is visible. Instructions leave out about half of the
harness's timed cost: ``--cache`` also counts the misses of this machine's
L2 cache, simulated (code and data a round fetches again from L3). Garbage
collection stays out (it is off while counting); the timed benchmarks keep it.

Each variant runs inside its own C function (``bisect.bisect_left`` with the
reply as its key, ...), so callgrind's inclusive count of that function is
the variant's alone, and everything else the process does (imports, agent
construction, the warm-up replies) is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import functools
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from ._common import Tools, full_policy, harness, make_agent, reply
from ._model import BenchModel
from .overhead import PassAgent, PassTool, overhead_script, without_hooks

ROUNDS = 20
VARIANTS = ("bare", "two pass-through middlewares", "machinery only (no hooks)", "full policy")
_SLOTS: tuple[tuple[str, Callable[[Callable[[Any], Any]], Any]], ...] = (
    ("_bisect_bisect_left", lambda f: bisect.bisect_left([1], 0, key=f)),
    ("_bisect_bisect_right", lambda f: bisect.bisect_right([1], 0, key=f)),
    ("functools_reduce", lambda f: functools.reduce(lambda _, b: f(b), [1, 2])),
    ("map_next", lambda f: list(map(f, [1]))),
)
"""C functions that call their key or function exactly once: one per variant."""


def _agent_factory(variant: str) -> tuple[Callable[[], Any], Any]:
    full = harness(full_policy())
    h = {"full policy": full, "machinery only (no hooks)": without_hooks(full)}.get(variant)
    extra = (PassAgent(), PassTool()) if variant == "two pass-through middlewares" else ()

    def build() -> Any:
        model = BenchModel(overhead_script(ROUNDS))
        return make_agent(model, Tools(), h, extra=extra) if extra else make_agent(model, Tools(), h)

    return build, h


def _child(replies: int) -> None:
    """Under callgrind: each variant's replies inside its own slot."""
    loop = asyncio.new_event_loop()
    for (_, slot), variant in zip(_SLOTS, VARIANTS, strict=True):
        build, h = _agent_factory(variant)
        for _ in range(3):  # compiled patterns, caches
            loop.run_until_complete(reply(build(), h))
        agents = [build() for _ in range(replies)]
        gc.collect()
        gc.disable()

        def replies_of(x: Any, agents: list[Any] = agents, h: Any = h) -> Any:
            for agent in agents:
                loop.run_until_complete(reply(agent, h))
            return x

        slot(replies_of)
        gc.enable()


def _inclusive(annotated: str, function: str) -> dict[str, int]:
    """``function``'s inclusive counts in ``callgrind_annotate``'s output, by
    event (``Ir``, and with the cache simulated ``ILmr``, ``DLmr``, ...)."""
    shown = re.search(r"^Events shown:\s+(.+)$", annotated, re.MULTILINE)
    events = shown.group(1).split() if shown is not None else ["Ir"]
    for line in annotated.splitlines():
        if re.search(":" + re.escape(function) + r" \[", line):
            counts = re.sub(r"\([^)]*\)", " ", line).split()[:len(events)]
            return {event: int(n.replace(",", "")) for event, n in zip(events, counts, strict=True)}
    raise RuntimeError(f"callgrind recorded no {function}")


def l2_cache() -> str:
    """This machine's level-2 cache as valgrind's ``--LL`` reads it
    (``size,associativity,line``); 1 MiB, 8-way, 64 B where sysfs does not say."""
    index = "/sys/devices/system/cpu/cpu0/cache/index2/"
    try:
        with open(index + "size") as size, open(index + "ways_of_associativity") as ways, \
                open(index + "coherency_line_size") as line:
            kib = int(size.read().strip().rstrip("K"))
            return f"{kib * 1024},{ways.read().strip()},{line.read().strip()}"
    except (OSError, ValueError):
        return "1048576,8,64"


def count(replies: int, l2: str | None = None) -> dict[str, dict[str, float]]:
    """Per round, each variant's instructions (``Ir``) and, with ``l2`` (a
    cache's ``size,associativity,line``: ``l2_cache()``), its misses in that
    cache, simulated (``L2 misses``): the last level valgrind simulates is set
    to it, the cache a round's code and data must stay in between one round
    and the next."""
    simulate = ["--cache-sim=yes", f"--LL={l2}"] if l2 is not None else []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(
            ["valgrind", "--tool=callgrind", *simulate, f"--callgrind-out-file={out}",
             sys.executable, "-m", "benchmarks.instructions", "--child", str(replies)],
            check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
            check=True, capture_output=True, text=True,
        ).stdout
    rounds = replies * ROUNDS
    counts = {}
    for (name, _), variant in zip(_SLOTS, VARIANTS, strict=True):
        events = _inclusive(annotated, name)
        counts[variant] = {"Ir": events["Ir"] / rounds}
        if l2 is not None:
            counts[variant]["L2 misses"] = (events["ILmr"] + events["DLmr"] + events["DLmw"]) / rounds
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__)
    parser.add_argument("--replies", type=int, default=3, help="replies of 20 rounds per variant")
    parser.add_argument("--cache", action="store_true",
                        help="also simulate this machine's L2 cache and count its misses (slower)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("valgrind is not installed: nothing counted")
        return 1
    l2 = l2_cache() if args.cache else None
    counts = count(args.replies, l2)
    print(f"per round ({args.replies} replies of {ROUNDS} rounds per variant, callgrind)")
    for event in counts["bare"]:
        bare = counts["bare"][event]
        print(f"  {'instructions' if event == 'Ir' else event + f' (L2 {l2})'}")
        for variant, events in counts.items():
            print(f"    {variant:<30} {events[event]:>12,.0f}   {events[event] / bare:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

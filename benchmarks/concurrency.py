"""Many concurrent replies on one Harness: CPU, garbage collection and peak
memory, bare against harnessed.

N replies (10, 100, 500) run at once with ``asyncio.gather``, each the
overhead benchmark's reply (full policy, nothing refused). Each variant runs
in its own child process, so its peak RSS is its own: the child warms up
with a few replies, then measures CPU time (``process_time``), the time
spent in garbage collection (``gc.callbacks``), the collections made and the
net GC-tracked allocations (containers allocated and not yet freed, counted
by generation 0: the work that makes collections happen), per round.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from ._common import Tools, full_policy, harness, make_agent, reply
from ._model import BenchModel
from ._report import Figure, Section
from .overhead import PassAgent, PassTool, overhead_script

GOAL_CPU = 1.15
GOAL_GC_POINTS = 2.0
SIZES = {
    "full": {"counts": (10, 100, 500), "rounds": 8, "reps": 3},
    "quick": {"counts": (3,), "rounds": 3, "reps": 1},
}


class GcClock:
    """Time spent in collections, and their number, while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections += 1


VARIANTS = ("bare", "floor", "harnessed")
"""``floor``: two pass-through middlewares (``overhead``'s), AgentScope's own
cost of any middleware on these hooks: its chain closures are garbage cycles."""


async def replies(n: int, variant: str, rounds: int) -> dict[str, float]:
    """Run ``n`` replies of a variant at once; CPU, GC and allocation figures."""
    h = harness(full_policy()) if variant == "harnessed" else None
    extra = (PassAgent(), PassTool()) if variant == "floor" else ()
    agents = [make_agent(BenchModel(overhead_script(rounds)), Tools(), h, extra=extra) for _ in range(n)]
    gc.collect()
    clock = GcClock()
    threshold = gc.get_threshold()[0]
    gc.callbacks.append(clock)
    count0 = gc.get_count()[0]
    collections0 = gc.get_stats()[0]["collections"]
    cpu = time.process_time()
    try:
        await asyncio.gather(*(reply(agent, h) for agent in agents))
    finally:
        cpu = time.process_time() - cpu
        gc.callbacks.remove(clock)
    young = gc.get_stats()[0]["collections"] - collections0
    allocated = young * threshold + gc.get_count()[0] - count0
    total_rounds = sum(agent.model.n_calls for agent in agents)
    if h is not None and len(h.table):
        raise AssertionError("runs left in the table")
    return {
        "cpu": cpu, "gc": clock.seconds, "collections": clock.collections,
        "rounds": total_rounds, "allocated": allocated,
    }


def child(n: int, variant: str, rounds: int) -> dict[str, float]:
    """One variant in this process (the child's entry point)."""
    asyncio.run(replies(2, variant, rounds))  # imports, caches
    out = asyncio.run(replies(n, variant, rounds))
    out["rss_kb"] = peak_rss_kb()
    return out


def peak_rss_kb() -> float:
    """This process's own peak RSS: ``VmHWM`` (Linux keeps the parent's
    ``ru_maxrss`` across fork and exec, so every child read the benchmark
    process's peak), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def in_child(n: int, variant: str, rounds: int) -> dict[str, float]:
    code = (
        "import json, logging, sys; logging.disable(logging.WARNING); "
        "from benchmarks.concurrency import child; "
        f"print(json.dumps(child({n}, {variant!r}, {rounds})))"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(samples: list[dict[str, float]]) -> dict[str, float]:
    """The repetition with the least CPU (the least disturbed by the machine)."""
    return min(samples, key=lambda s: s["cpu"])


async def run(size: str = "full") -> Section:
    p = SIZES[size]
    section = Section("Concurrent replies on one Harness")
    section.table_head = [
        "replies", "CPU ms (bare)", "CPU ms (harnessed)", "CPU ratio", "GC share bare", "GC share harnessed",
        "allocations/round bare", "allocations/round harnessed", "peak RSS MB bare", "peak RSS MB harnessed",
    ]
    rows = {}
    for n in p["counts"]:
        samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for _ in range(p["reps"]):  # interleaved: the machine's load hits all alike
            for v in VARIANTS:
                samples[v].append(in_child(n, v, p["rounds"]))
        b, f, h = (best(samples[v]) for v in VARIANTS)
        rows[n] = (b, h)
        share_b, share_h = b["gc"] / b["cpu"], h["gc"] / h["cpu"]
        ratio = h["cpu"] / b["cpu"]
        full = size == "full"
        section.figures += [
            Figure("concurrency", f"{n} concurrent replies: CPU", h["cpu"] * 1e3, b["cpu"] * 1e3, unit="ms",
                   goal=f"<= {GOAL_CPU}x", met=ratio <= GOAL_CPU if full else None,
                   note=f"{int(h['rounds'])} rounds"),
            Figure("concurrency", f"{n} concurrent replies: GC share of CPU (%)", share_h * 100,
                   share_b * 100, goal=f"within {GOAL_GC_POINTS:g} points of bare",
                   met=(share_h - share_b) * 100 <= GOAL_GC_POINTS if full else None, show_ratio=False),
            Figure("concurrency", f"{n} concurrent replies: floor (2 pass-through middlewares) CPU",
                   f["cpu"] * 1e3, b["cpu"] * 1e3, unit="ms",
                   note=f"GC share {f['gc'] / f['cpu']:.1%}; harnessed {ratio / (f['cpu'] / b['cpu']):.3f}x the floor"),
            Figure("concurrency", f"{n} concurrent replies: GC share above the floor (points)",
                   (share_h - f["gc"] / f["cpu"]) * 100, None, show_ratio=False,
                   note="harnessed minus the floor (below 0: the harness frees the chains the floor leaves)"),
            Figure("concurrency", f"{n} concurrent replies: peak RSS", h["rss_kb"] / 1024, b["rss_kb"] / 1024,
                   unit="MB"),
            Figure("concurrency", f"{n} concurrent replies: GC-tracked allocations per round",
                   h["allocated"] / h["rounds"], b["allocated"] / b["rounds"]),
        ]
        section.table.append([
            str(n), f"{b['cpu'] * 1e3:,.0f}", f"{h['cpu'] * 1e3:,.0f}", f"{ratio:.3f}x",
            f"{share_b:.1%}", f"{share_h:.1%}", f"{b['allocated'] / b['rounds']:,.0f}",
            f"{h['allocated'] / h['rounds']:,.0f}", f"{b['rss_kb'] / 1024:,.1f}", f"{h['rss_kb'] / 1024:,.1f}",
        ])
    section.data = {"rows": rows}
    return section

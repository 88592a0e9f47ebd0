"""Scale: what custom hooks cost as their number grows (0, 25, 100, 500).

No-op hooks are spread evenly over the four points a round meets
(``pre_think``, ``pre_tool_call``, ``post_tool_call``, ``post_reflect``).

- dispatch: the hook runner alone (built-ins disabled), one round's four
  points with fresh contexts, timed in a tight loop: the pure dispatch cost.
- agent: the overhead benchmark's agent (full policy, built-ins on) with
  the custom hooks added, per-round wall time interleaved with the bare
  agent.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from agentscope_harness import HookContext, harness_hook
from agentscope_harness.context import ToolCallView, ToolResultView
from agentscope_harness.hooks import BUILTIN_HOOKS

from ._common import full_policy, harness
from ._report import Figure, Section
from .overhead import measure

ROUND_POINTS = ("pre_think", "pre_tool_call", "post_tool_call", "post_reflect")
SIZES = {
    "full": {"counts": (0, 25, 100, 500), "loops": 2000, "rounds": 10, "pairs": 16, "warmup": 3},
    "quick": {"counts": (0, 25), "loops": 50, "rounds": 3, "pairs": 1, "warmup": 0},
}


def noop_hooks(n: int) -> list[Any]:
    hooks = []
    for i in range(n):
        def noop(ctx: HookContext) -> None:
            return None

        hooks.append(harness_hook(ROUND_POINTS[i % 4], priority=50 + i % 7, name=f"noop_{i}")(noop))
    return hooks


async def dispatch_per_round(n: int, loops: int) -> float:
    """Seconds per round spent running ``n`` no-op hooks (built-ins off)."""
    builtins = {f.__harness_hook__.name for f in BUILTIN_HOOKS}
    h = harness(full_policy(disabled_hooks=builtins), hooks=noop_hooks(n))
    run = h.table.open("scale", "bench", None, None, None, None, "enforce")
    policy = h.config.tools["search"]
    runner = h.runner
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for i in range(loops):
            ctx = HookContext("pre_think", run, h.services)
            await runner.run("pre_think", ctx)
            view = ToolCallView(
                id=f"c{i}", name="search", args={"q": "k"},
                policy=policy, batch=("scale", i),
            )
            ctx = HookContext("pre_tool_call", run, h.services, tool=view)
            await runner.run("pre_tool_call", ctx)
            ctx.point = "post_tool_call"
            ctx.result = ToolResultView(text="ok", state="success", metadata={})
            await runner.run("post_tool_call", ctx)
            ctx = HookContext("post_reflect", run, h.services)
            await runner.run("post_reflect", ctx)
        best = min(best, (time.perf_counter() - start) / loops)
    return best


async def run(size: str = "full") -> Section:
    p = SIZES[size]
    section = Section("Scale: custom hooks")
    section.table_head = [
        "custom hooks", "dispatch µs/round", "µs per hook call",
        "agent µs/round (harnessed)", "agent µs/round (bare)", "ratio",
    ]
    base_dispatch = None
    rows = []
    for n in p["counts"]:
        dispatch = await dispatch_per_round(n, p["loops"])
        if base_dispatch is None:
            base_dispatch = dispatch
        per_hook = (dispatch - base_dispatch) / n if n else 0.0
        h = harness(full_policy(), hooks=noop_hooks(n))
        bare, harnessed = await measure(h, p["rounds"], p["pairs"], p["warmup"])
        mb, mh = statistics.median(bare), statistics.median(harnessed)
        rows.append((n, dispatch, per_hook, mh, mb))
        section.table.append([
            str(n), f"{dispatch * 1e6:.1f}", f"{per_hook * 1e6:.2f}" if n else "-",
            f"{mh * 1e6:,.0f}", f"{mb * 1e6:,.0f}", f"{mh / mb:.3f}x",
        ])
    for n, dispatch, _per_hook, mh, mb in rows:
        section.figures.append(Figure(
            "scale", f"{n} custom hooks: dispatch per round", dispatch * 1e6, None, unit="us",
            note=f"agent {mh / mb:.3f}x bare",
        ))
    section.data = {"rows": rows}
    return section

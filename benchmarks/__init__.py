"""Benchmarks: the harnessed agent against the same bare AgentScope agent,
side by side in one run. ``python -m benchmarks`` (from the repository root)
runs them all, prints every figure as a ratio with its goal beside it and
writes the table to ``benchmarks/RESULTS.md``.

Modules: ``overhead`` (wall time per round), ``tokens`` (input tokens and the
prefix-cache estimate on a retrieval-heavy run), ``prefix`` (prefix breaks
caused by control actions), ``termination`` (stubborn model, dependency
down), ``scale`` (cost of custom hooks), ``large_results`` (10 KB to 5 MB
results end to end: harness time, longest loop block), ``long_run`` (a
500-round reply: per-round cost at the start and the end), ``concurrency``
(10/100/500 concurrent replies: CPU, GC share, peak RSS). Each has ``async run(size)`` with
``size`` ``"full"`` or ``"quick"`` (tiny, used by the test that keeps them
runnable).
"""

MODULES = (
    "overhead", "tokens", "prefix", "termination", "scale", "redaction", "fleet", "injection_eval",
    "budgets",
    "large_results", "long_run", "concurrency",
)

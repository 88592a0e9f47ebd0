"""Benchmarks: the harnessed agent against the same bare AgentScope agent,
side by side in one run. ``python -m benchmarks`` (from the repository root)
runs them all, prints every figure as a ratio with its goal beside it and
writes the table to ``benchmarks/RESULTS.md``.

Modules: ``overhead`` (wall time per round), ``tokens`` (input tokens and the
prefix-cache estimate on a retrieval-heavy run), ``prefix`` (prefix breaks
caused by control actions), ``termination`` (stubborn model, dependency
down), ``scale`` (cost of custom hooks). Each has ``async run(size)`` with
``size`` ``"full"`` or ``"quick"`` (tiny, used by the test that keeps them
runnable).
"""

MODULES = (
    "overhead", "tokens", "prefix", "termination", "scale", "redaction", "fleet", "injection_eval",
    "budgets",
)

"""Round 108 (a), a regression of round 107's stacked-declaration check.
``harness_hook`` now refuses any function that has a ``__harness_hook__``
attribute. A wrapper made with ``functools.wraps`` (any logging, timing or
retry decorator) copies the wrapped function's ``__dict__``, so a function
*of its own that calls* a declared hook, the very pattern README recommends
("declare the second on a function of its own that calls it"), is refused
as "declared already", though nothing would be lost: the wrapper's attribute
is a copy, the first hook keeps its own. A pack's gate reused at another
point (or priority) through a ``functools.wraps`` wrapper cannot be declared.

Cause: registry.harness_hook.decorate checks ``isinstance(declared, HookSpec)``,
not that the spec was declared on this very function (``declared.fn is fn``)."""

from __future__ import annotations

import functools

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook


@harness_hook("pre_tool_call", priority=25, name="no_refunds", kind="safety")
def no_refunds(ctx) -> None:
    if ctx.tool.name == "refund":
        raise HookRejectSignal("Refunds are not processed here; tell the user.")


def logged(fn):
    @functools.wraps(fn)
    def wrapper(ctx):
        print("hook", ctx.point)
        return fn(ctx)
    return wrapper


def test_a_function_of_its_own_calling_a_declared_hook_can_be_declared() -> None:
    audit = harness_hook("post_tool_call", priority=90, name="no_refunds_audit")(logged(no_refunds))
    h = Harness(HarnessConfig(), hooks=[no_refunds, audit], load_entry_points=False)
    assert {"no_refunds", "no_refunds_audit"} <= {s.name for s in h.all_hooks}
    assert no_refunds.__harness_hook__.point == "pre_tool_call"

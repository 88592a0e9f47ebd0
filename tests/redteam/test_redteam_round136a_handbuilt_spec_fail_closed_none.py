"""Round 136a: round 135 moved the declared-hook checks into ``HookSpec.__post_init__``
("a HookSpec built by hand is checked as a declared one") and gave a hand-built efficiency
spec its ``escape_key`` default, but not ``fail_closed``'s.

README "Writing a hook": "a `HookSpec` built by hand is checked as a declared one (a
safety hook fails closed ...)"; ``harness_hook(fail_closed=None)`` means the kind's
default. The refusal's own text says "fail_closed must be True, False or None (the
kind's default)".

Attack: ``HookSpec(..., kind="safety", escape_key=None, ..., fail_closed=None)``, as
``make_spec``'s signature spells it.
What happened: ``HarnessConfigError: fail_closed must be True, False or None (the kind's
default)``: ``None`` refused by the message that offers it. Should: the kind's default
(a safety spec fails closed), as ``escape_key`` gets its default.
"""
from __future__ import annotations

from agentscope_harness import HookContext
from agentscope_harness.registry import HookSpec, make_spec


def no_weekend_refunds(ctx: HookContext) -> None:
    return None


def test_a_handbuilt_spec_takes_its_kinds_fail_closed_default() -> None:
    declared = make_spec(no_weekend_refunds, "pre_tool_call", 8, kind="safety", fail_closed=None)
    assert declared.fail_closed is True  # the control: declared, None is the kind's default
    spec = HookSpec(fn=no_weekend_refunds, point="pre_tool_call", priority=8, name="no_weekend_refunds",
                    kind="safety", escape_key=None, module=__name__, is_async=False, fail_closed=None)
    assert spec.fail_closed is True

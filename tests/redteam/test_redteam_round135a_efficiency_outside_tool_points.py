"""Scenario round 135 (a): an efficiency hook (a presumption) at ``post_reflect``
or ``pre_think`` ends the whole run at its first refusal.

README, "How it works": "Two kinds of gates. Safety gates judge exact facts and
always refuse. Efficiency gates judge presumptions ("you probably have enough
results"); after ``escape_after_rejects`` refusals in a run they *latch open*: they
stop refusing for the rest of the run, so a wrong presumption cannot block a task."
"Writing a hook": "A *safety* hook that refuses or fails at ``pre_think``,
``post_reflect`` or ``on_system_prompt`` stops the run (there is no call to refuse
there)." ``harness_hook`` accepts ``kind="efficiency"`` at every point (DESIGN §3:
``kind`` is "safety", "efficiency" (must give an escape_key, defaulting to the hook
name) or "observer"/"transform").

Attack: ``@harness_hook("post_reflect", kind="efficiency")`` raising
``HookRejectSignal("You probably have enough; conclude.", code="enough_results")``
after each round, with ``escape_after_rejects=2`` (the default).
Happened: the first refusal stops the run (``incomplete``, ``policy_refused``): the
fallback answer after one model call, the second search never made, no
``allow_escape``: a wrong presumption blocked the task. Either the latch applies
(the run goes on after two refusals) or such a hook is refused at construction
as ``when=`` is outside the tool points; it is neither.

Real Agent, real tool in a real instrumented Toolkit, scripted model.
"""

from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfigError, HookRejectSignal, HookSpec, harness_hook


@pytest.mark.parametrize("point", ["post_reflect", "pre_think", "on_system_prompt"])
def test_an_efficiency_gate_outside_the_tool_points_is_refused_at_construction(point: str) -> None:
    """There is no call to latch open at these points, and a refusal there stops the run:
    the presumption would block the task. Declared or built by hand, it is refused, named."""
    def presume(ctx) -> None:
        raise HookRejectSignal("You probably have enough; conclude.", code="enough_results")

    with pytest.raises(HarnessConfigError, match="probably_enough.*efficiency gate"):
        harness_hook(point, priority=30, name="probably_enough", kind="efficiency")(presume)
    with pytest.raises(HarnessConfigError, match="probably_enough.*efficiency gate"):
        HookSpec(presume, point, 30, "probably_enough", "efficiency", None, __name__, is_async=False)

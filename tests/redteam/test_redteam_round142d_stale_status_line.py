"""Round 142 d (scenarios: around the hooks). README "Budgets users can see": the
status line is given "when its tier changes, a ledger reaches its soft limit, or the
wrap-up window starts"; hook 2: past the deadline "the fallback answer ... without a
model call"; "The deadline bounds each `reply` call".

Attack: `deadline_s=1`; reply 1's tool runs past the deadline and is cut (the run
ends `incomplete`, `deadline`, the fallback given, no further model call). The user
asks again on the same agent: reply 2 has its whole deadline.
What happened: after the fallback was decided, `budget_router` still wrote
"[harness:budget] 0s left" into the agent's context; reply 2's model read it as its
latest budget line (and was given no other).
"""
from __future__ import annotations

import asyncio

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio


async def slow_backend(s: float) -> str:
    """Wait on a slow backend.

    Args:
        s (float): Seconds.
    """
    await asyncio.sleep(s)
    return "slept"


async def test_a_reply_stopped_at_its_deadline_leaves_no_status_line_for_the_next() -> None:
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("slow_backend", {"s": 3})), text("Here is your answer.")])
    agent = make_agent(model, [slow_backend], h.middlewares())
    await run(agent, "first question")
    first = h.last_report(agent)
    assert (first.terminal_state, first.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert len(model.calls) == 1
    await run(agent, "second question")
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED
    lines = [str(m["content"]) for m in model.calls[-1].formatted if "[harness:budget]" in str(m["content"])]
    assert not any("0s left" in line for line in lines), lines

"""Round 107 (a): verbs a hook used at a point where nothing acts on them were
dropped silently (``ctx.admit`` outside ``pre_tool_call``: the user's limit
never charged; ``ctx.notice`` at ``pre_think``) or reported as done
(``ctx.hint`` / ``ctx.constrain`` at ``on_session_end``: a decision in the
report, nothing given). Round 101 (c) made them fail loudly at
``on_system_prompt``; now everywhere they cannot act: the hook fails, and
the report says why."""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

REFUNDS: list[str] = []
LIMIT = {"used": 0}


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    REFUNDS.append(order_id)
    return f"refunded {order_id}"


def _charge() -> None:
    if LIMIT["used"] >= 1:
        raise HookRejectSignal("Only one refund per conversation.", code="quota_exhausted")
    LIMIT["used"] += 1


@harness_hook("post_tool_call", priority=60, name="one_refund", kind="safety")
def one_refund(ctx) -> None:
    # count only refunds that went through; the charge re-checks and refuses
    if ctx.tool.name == "refund" and ctx.result.ok:
        ctx.admit(_charge)


@harness_hook("on_session_end", priority=50, name="next_time", kind="observer")
def next_time(ctx) -> None:
    ctx.hint("Greet the user by name next time.", key="greet")
    ctx.constrain("answer without tools from now on", code="no_tools")


async def test_admit_outside_pre_tool_call_is_not_silently_dropped() -> None:
    REFUNDS.clear()
    LIMIT["used"] = 0
    h = Harness(HarnessConfig(), hooks=[one_refund], load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("refund", {"order_id": "A-2"})),
                           calls(("refund", {"order_id": "A-3"})), text("done")])
    agent = make_agent(model, [tool(refund)], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    mine = [d for d in report.decisions if d.hook == "one_refund"]
    assert LIMIT["used"] == 0  # never charged: the verb failed loudly instead
    errors = [d for d in mine if d.action == "error"]
    # each refund's failure is told (from round 142 the second one met climbs the refusal ladder)
    assert len(errors) >= 2 and all("ctx.admit() is not available at post_tool_call" in d.detail for d in errors)
    # a safety hook that fails, fails closed: the model is not told the refunds went through
    told = [m for c in model.calls[1:] for m in tool_messages(c)]
    assert told and all("one_refund could not run, so this was withheld" in m for m in told), told


async def test_hint_and_constrain_at_session_end_not_reported_as_given() -> None:
    h = Harness(HarnessConfig(), hooks=[next_time], load_entry_points=False)
    model = ScriptedModel([text("hello"), calls(("refund", {"order_id": "A-9"})), text("done")])
    agent = make_agent(model, [tool(refund)], h.middlewares())
    await run(agent)
    first = h.last_report(agent)
    mine = [d for d in first.decisions if d.hook == "next_time"]
    await run(agent, "refund A-9")
    seen = " ".join(str(m) for c in model.calls[1:] for m in c["formatted"])
    given = "Greet the user by name" in seen
    narrowed = any(c.tool_choice not in (None, "auto") for c in model.calls[1:])
    # the report says a hint was given and the run constrained; the model saw neither
    said = {d.action for d in mine}
    assert not given and not narrowed
    assert not ({"hint", "constrain"} & said), mine  # nothing reported as given
    assert [d.action for d in mine] == ["error"] and "ctx.hint() is not available at on_session_end" in mine[0].detail


@harness_hook("pre_think", priority=50, name="note_early", kind="observer")
def note_early(ctx) -> None:
    ctx.notice("Remember to cite sources.")


async def test_notice_at_pre_think_fails_loudly() -> None:
    h = Harness(HarnessConfig(), hooks=[note_early], load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("done")])
    agent = make_agent(model, [tool(refund)], h.middlewares())
    await run(agent)
    mine = [d for d in h.last_report(agent).decisions if d.hook == "note_early"]
    assert mine and {d.action for d in mine} == {"error"}, mine
    assert "ctx.notice() is not available at pre_think" in mine[0].detail
    assert "cite sources" not in " ".join(tool_messages(model.calls[1]))

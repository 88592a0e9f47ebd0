"""Red team, round 29: around round 28's fixes.

1. confirmations: one call confirmed twice (AgentScope keeps the last),
   a batch where one call is confirmed as shown and another edited;
2. client results in ERROR / RUNNING / INTERRUPTED state for a call whose
   tool has a ``metadata_schema`` (AgentScope checks SUCCESS only);
3. a client result AgentScope takes only because the harness rewrote it;
4. ``HookContext.stop`` after the run ended (resumed by another caller).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import ToolResultBlock, ToolResultState, UserMsg
from hookkit import Ran
from scripted import ALICE, BOB, calls, drain, text, tool
from test_redteam_round28 import (
    VERIFY_SCRIPT,
    _allow_rule,
    _asked_verify,
    _r,
    _refund_shop,
    _verify_then_refund,
)

from agentscope_harness import Principal, TerminalState


async def _asked(h: Any, agent: Any, who: Principal = ALICE) -> list[Any]:
    with h.acting_for(who):
        events = await drain(agent, UserMsg("user", "refund"))
    return [c for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls]


# ====================================================== 1. confirmations


def _edit(call: Any, **changes: Any) -> Any:
    import json

    args = json.loads(call.input) if isinstance(call.input, str) else dict(call.input)
    args.update(changes)
    return json.dumps(args) if isinstance(call.input, str) else args


async def test_one_call_confirmed_as_shown_then_edited_runs_no_edit() -> None:
    """AgentScope keeps the last confirmation of an id (a dict): the harness
    must judge what runs, not the first entry it was shown."""
    ran = Ran()
    h, agent, _ = _refund_shop(ran, [calls(_r("o-1", 10)), text("Refunded o-1.")])
    shown = (await _asked(h, agent))[0]
    edited = shown.model_copy(update={"input": _edit(shown, amount=500)})
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=agent.state.reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=shown, rules=[_allow_rule("*")]),
            ConfirmResult(confirmed=True, tool_call=edited)]))
    assert all(a["amount"] != 500 for a in ran.of("refund")), ran


async def test_a_rule_with_the_shown_call_and_an_edited_second_confirmation_leaves_no_rule() -> None:
    """The shown call confirmed with "always allow refund", then the same id
    edited (no rules): AgentScope takes the edit, so the rule the harness
    let through for the shown call must not outlive it."""
    ran = Ran()
    h, agent, _ = _refund_shop(ran, [calls(_r("o-1", 10)), text("ok"), calls(_r("o-2", 10)), text("Refunded o-2.")])
    shown = (await _asked(h, agent))[0]
    edited = shown.model_copy(update={"input": _edit(shown, amount=11)})
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=agent.state.reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=edited),
            ConfirmResult(confirmed=True, tool_call=shown, rules=[_allow_rule()])]))
        assert ran.of("refund") == [{"order_id": "o-1", "amount": 10, "user_id": "u-42"}], ran
        events = await drain(agent, UserMsg("user", "and o-2"))
    # the legit rule (the shown call, by its owner) stands: o-2 runs unasked
    assert len(ran.of("refund")) == 2 and not any(isinstance(e, RequireUserConfirmEvent) for e in events)


async def test_another_callers_interrupt_leaves_no_rule_and_nothing_runs() -> None:
    from agentscope.event import UserInterruptEvent

    ran = Ran()
    h, agent, _ = _refund_shop(ran, [calls(_r("o-1", 10)), calls(_r("o-2", 10)), text("y")])
    await _asked(h, agent)
    with h.acting_for(BOB):
        await drain(agent, UserInterruptEvent(reply_id=agent.state.reply_id))
    assert ran.of("refund") == []
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "o-2"))
    assert ran.of("refund") == [] and any(isinstance(e, RequireUserConfirmEvent) for e in events)


# ====================================================== 2. client results not SUCCESS


@pytest.mark.parametrize("state", [ToolResultState.ERROR, ToolResultState.RUNNING, ToolResultState.INTERRUPTED,
                                   ToolResultState.DENIED])
async def test_a_non_success_client_result_is_no_prerequisite(state: ToolResultState) -> None:
    ran = Ran()
    h, agent, _ = _verify_then_refund(ran, list(VERIFY_SCRIPT))
    call = await _asked_verify(h, agent)
    block = ToolResultBlock(id=call.id, name=call.name, output="code accepted", state=state, metadata={})
    with h.acting_for(ALICE):
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[block]))
    assert ran.of("refund") == [], ran


async def test_a_dup_success_misshapen_is_not_what_makes_a_later_result_taken() -> None:
    """[good verify_code, the same id again SUCCESS without checked_at]: the
    harness turns the second into an ERROR line before AgentScope checks it,
    so AgentScope takes the event; the prerequisite is from the first only,
    and the report completes."""
    ran = Ran()
    h, agent, _ = _verify_then_refund(ran, list(VERIFY_SCRIPT))
    call = await _asked_verify(h, agent)
    good = ToolResultBlock(id=call.id, name=call.name, output="ok", state=ToolResultState.SUCCESS,
                           metadata={"checked_at": "now"})
    dup = ToolResultBlock(id=call.id, name=call.name, output="dup", state=ToolResultState.SUCCESS, metadata={})
    with h.acting_for(ALICE):
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                         execution_results=[good, dup]))
    assert ran.of("refund") == [{"order_id": "A-1"}], ran
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED


# ====================================================== 3. a stop after the run ended


FOUND = "Alice lives at 1 Main St"


async def test_a_late_stop_after_another_callers_resume_reveals_nothing_found() -> None:
    """Bob resumes Alice's parked client call: the run ends without what it
    found; a late pre_think stop must not add it back."""
    from agentscope.tool import Toolkit
    from hookkit import client_tool
    from scripted import ScriptedModel, make_agent

    from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook

    @harness_hook("pre_think", name="house_stop", priority=1)
    def house_stop(ctx: HookContext) -> None:
        if ctx.run.facts.terminal is not None:
            ctx.stop("house_rule", TerminalState.INCOMPLETE, text="Stopped.")

    async def lookup(q: str) -> str:
        """Look up.

        Args:
            q (str): what.
        """
        return FOUND

    h = Harness(HarnessConfig(), hooks=(house_stop,), load_entry_points=False)
    model = ScriptedModel([calls(("lookup", {"q": "a"})), calls(("client_lookup", {"order_id": "o-1"})),
                           text("never")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup), client_tool()])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "where do I live?"))
    call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    block = ToolResultBlock(id=call.id, name=call.name, output="bob's data", state=ToolResultState.SUCCESS)
    with h.acting_for(BOB):
        events = await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                                  execution_results=[block]))
    said = events[-1].get_text_content() or ""
    assert FOUND not in said, said
    assert h.last_report(agent).terminal_state is TerminalState.INCOMPLETE


@pytest.mark.parametrize("late_state", [TerminalState.COMPLETED, TerminalState.INCOMPLETE])
async def test_a_late_stop_after_a_dependency_went_down_does_not_say_all_set(late_state: TerminalState) -> None:
    from agentscope.tool import Toolkit
    from hookkit import drive, inventory_down
    from scripted import ScriptedModel, make_agent

    from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook

    @harness_hook("pre_think", name="house_stop", priority=1)
    def house_stop(ctx: HookContext) -> None:
        if ctx.run.facts.terminal is not None:
            ctx.stop("house_rule", late_state, text="All set: your order is on its way.")

    script = [calls(("inventory_down", {"sku": "s-1"})), text("In stock!"), text("never")]
    h = Harness(HarnessConfig(), hooks=(house_stop,), load_entry_points=False)
    agent = make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(inventory_down)])), h.middlewares())
    _, final, report = await drive(h, agent, ALICE)
    said = final.get_text_content() or ""
    assert "All set" not in said and report.terminal_state is TerminalState.INCOMPLETE, (said, report.reason)
    assert "In stock" not in said, said

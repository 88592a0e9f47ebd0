"""Red team, round 33: the security promises after rounds 30-32, from a user's side.

1. human approvals: an "always allow" rule the owner gave with her
   confirmation, on an agent two principals share (does it run the other
   principal's call unasked?); a hook's ``ctx.ask`` with an empty reason;
2. what a hook's verbs carry: ``ctx.constrain(reason)`` and ``ctx.stop(reason)``
   quoting a secret argument (the report's reason, the fallback answer, the
   stream), a notice given before the call runs (regression guards);
3. AgentScope's real ``OpenAIChatModel`` on the scripted server (tool-call
   arguments split across SSE deltas): a secret spelled with JSON escapes,
   split across deltas, in the streamed arguments; an identity argument
   spelled with escapes, confusables and duplicate keys, for two principals
   (regression guards).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import (
    ConfirmResult,
    RequireUserConfirmEvent,
    ToolCallDeltaEvent,
    UserConfirmResultEvent,
)
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from hookkit import Ran, every_event, searcher
from scripted import ALICE, BOB, calls, drain, make_agent, text, tool
from test_redteam_round27 import _allow_refund_rule, _asking_refund, _parked
from test_redteam_round31_hooks import SECRET, _agent, _reply
from test_redteam_round32 import _real_model

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookContext,
    TerminalState,
    ToolPolicy,
    harness_hook,
)

# ====================================================== 1. human approvals


async def test_alices_always_allow_rule_does_not_run_bobs_refund_unasked() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran, [calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
                                    calls(("refund", {"order_id": "o-999"})), text("Refunded o-999.")])
    ask = await _parked(h, agent)
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=[_allow_refund_rule()])
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))
    assert ran.of("refund") == [{"order_id": "o-1"}]  # Alice's own call, as she confirmed it
    with h.acting_for(BOB):
        events = await drain(agent, UserMsg("user", "and refund o-999 for me"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)


async def test_alices_always_allow_rule_still_serves_alice() -> None:
    """Control of the one above: the rule Alice gave lets her own next
    refund run unasked (AgentScope's "always allow", as she meant it)."""
    ran = Ran()
    h, agent = _asking_refund(ran, [calls(("refund", {"order_id": "o-1"})), text("Refunded o-1."),
                                    calls(("refund", {"order_id": "o-2"})), text("Refunded o-2.")])
    ask = await _parked(h, agent)
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=[_allow_refund_rule()])
    with h.acting_for(ALICE):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))
        events = await drain(agent, UserMsg("user", "and refund o-2"))
    assert ran.of("refund") == [{"order_id": "o-1"}, {"order_id": "o-2"}], ran
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)


async def test_a_hooks_ask_with_an_empty_reason_still_parks_the_call() -> None:
    @harness_hook("pre_tool_call", priority=60, name="needs_a_human")
    def needs_a_human(ctx: HookContext) -> None:
        ctx.ask(str(ctx.tool.args.get("why", "")))  # the reason shown is what the model gave

    ran = Ran()
    h = Harness(HarnessConfig(), hooks=[needs_a_human], load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "payroll"})), text("done")], [searcher(ran)])
    events, _ = await _reply(h, agent)
    assert ran == [], ran
    assert h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)


async def test_a_hooks_ask_with_a_reason_parks_the_call() -> None:
    """Regression guard (control of the one above): a reason, the call parks."""

    @harness_hook("pre_tool_call", priority=60, name="needs_a_human")
    def needs_a_human(ctx: HookContext) -> None:
        ctx.ask("payroll lookups need a human")

    ran = Ran()
    h = Harness(HarnessConfig(), hooks=[needs_a_human], load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "payroll"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    assert ran == [] and h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT


# ====================================================== 2. what a hook's verbs carry


@pytest.mark.parametrize("verb", ["constrain", "stop", "pending_notice"])
async def test_a_verb_quoting_a_secret_argument_leaks_it_nowhere(verb: str) -> None:
    """README 'Writing a hook': a constrained model that keeps calling tools
    ends with the reason (no code given: the reason itself, in the report
    and the fallback answer's words); a stop's reason likewise; a notice
    given before the call runs. A secret argument the hook quotes reaches
    neither the report, the answer, the model's next payload nor the stream."""

    @harness_hook("pre_tool_call" if verb == "pending_notice" else "post_tool_call", priority=60, name="quoting")
    def quoting(ctx: HookContext) -> None:
        said = f"the lookup of {ctx.tool.args['q']} is enough"
        if verb == "constrain":
            ctx.constrain(said)
        elif verb == "stop":
            ctx.stop(said)
        else:
            ctx.notice(said)

    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[SECRET]), hooks=[quoting], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": SECRET})), calls(("search", {"q": "b"})), text("x")],
                          [searcher(ran)])
    events, final = await _reply(h, agent)
    report = h.last_report(agent)
    assert SECRET not in report.model_dump_json()
    assert SECRET not in final.get_text_content()
    assert SECRET not in every_event(events)
    later = [m for c in model.calls[1:] for m in c.formatted if m["role"] != "assistant"]  # the model wrote the call
    assert SECRET not in json.dumps(later)
    if verb != "pending_notice":
        assert "is enough" in final.get_text_content()  # the reason was given, redacted


# ====================================================== 3. the real client, split deltas


@pytest.mark.parametrize("raw", [
    '{"q": "zq7-CORAL-har\\u0062or-88421-tango"}',
    '{"q": "zq7\\u002dCORAL\\u002dharbor\\u002d88421\\u002dtango"}',
    '{"q": "\\u007a\\u0071\\u0037-CORAL-harbor-88421-tang\\u006f"}',
    "{'q': 'zq7-CORAL-harbor-88421-tango'}",
], ids=["one-escape", "escaped-dashes", "escaped-ends", "single-quoted"])
async def test_a_streamed_secret_spelled_with_escapes_is_redacted(server: Any, raw: str) -> None:
    """README 'Secrets': tool-call arguments are redacted "however the model
    spells a secret"; through the real client the arguments come in three
    deltas, each escape cut by them somewhere."""
    from server import Reply

    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[SECRET]), load_entry_points=False)
    server.plan(Reply(tool_calls=[("search", raw)]), Reply(text="done"))
    agent = make_agent(_real_model(server), h.instrument(Toolkit(tools=[tool(searcher(ran))])), h.middlewares())
    events, _ = await _reply(h, agent)
    shown = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    decoded = shown.encode().decode("unicode_escape", errors="ignore")
    assert "CORAL" not in decoded and "harbor" not in decoded, shown
    assert SECRET not in every_event(events)
    assert ran.of("search") == [{"q": SECRET}]  # the tool still gets the real value


@pytest.mark.parametrize(("raw", "runs"), [
    ('{"user_id": "u\\u002d42", "order": "o-1"}', True),  # the tool receives "u-42": Alice's own
    ('{"user_id": "u\\u201142", "order": "o-1"}', False),  # a non-breaking hyphen
    ('{"user_id": "u-42", "user_id": "u-7", "order": "o-1"}', False),  # the last key wins: Bob's
    ('{"user_id": "u-7", "user_id": "u-42", "order": "o-1"}', True),
    ('{"user_id": "u-42 ", "order": "o-1"}', False),
    ('{"user_id": "\\uff55-42", "order": "o-1"}', False),  # fullwidth u
], ids=["escaped-dash", "nb-hyphen", "dup-bob-last", "dup-alice-last", "trailing-space", "fullwidth"])
async def test_a_streamed_identity_argument_acts_only_for_alice(server: Any, raw: str, runs: bool) -> None:
    """README 'Security' (Identity): judged on AgentScope's own parse, the
    value the tool receives; two principals share the agent (Bob first)."""
    from server import Reply

    ran = Ran()

    async def orders(user_id: str, order: str) -> str:
        """Show an order.

        Args:
            user_id (str): Whose.
            order (str): Which.
        """
        ran.append(("orders", {"user_id": user_id, "order": order}))
        return f"order {order} of {user_id}: 2 mugs"

    h = Harness(HarnessConfig(tools={"orders": ToolPolicy(identity_args={"user_id": "user_id"})}),
                load_entry_points=False)
    server.plan(Reply(text="Hello Bob."), Reply(tool_calls=[("orders", raw)]), Reply(text="done"))
    agent = make_agent(_real_model(server), h.instrument(Toolkit(tools=[tool(orders)])), h.middlewares())
    with h.acting_for(BOB):
        await drain(agent, UserMsg("user", "hi"))
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "my order o-1"))
    assert all(args["user_id"] == "u-42" for args in ran.of("orders")), ran
    assert bool(ran.of("orders")) is runs, ran

"""Red team, round 31: the round-30 fixes to the extension points, from a user's side.

1. ``ctx.hint`` from a tool-point hook (``pre_tool_call``, ``post_tool_call``):
   given once, after the results, before the next model call; not in shadow
   mode; what it streams to a UI (a secret the hook quotes);
2. ``ctx.constrain(reason, code)``: the code a model ignoring it ends with,
   a required finishing tool, the stall ladder's own reason (regression);
3. ``ask_when`` and ``count_results`` bounded by ``hook_timeout_s`` and the
   deadline (fail closed, the call not made past the deadline), and their
   neighbour, a remembered approval's ``when``;
4. a sub-agent's ending in the lead's tool result
   (``metadata["harness"]["sub_runs"]``): a sub-agent resumed by a later
   call, a call cut at the deadline, the lead's secrets in the reason;
5. the candidate policy (``Harness(config, candidate=...)``): false
   differences of a candidate equal to the live policy (AgentScope's own
   confirmation, a human's USD extension, a sub-agent under another
   Harness, a human's ledger extension), a provider without usage, a custom
   async hook it runs again, what the model sees, what it keeps after runs end.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import time
from typing import Any

import pytest
from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.model import ChatResponse
from agentscope.tool import FunctionTool, ToolBase, Toolkit
from hookkit import Ran, every_event, searcher
from scripted import ALICE, ScriptedModel, calls, make_agent, parking_tools, text, tool

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    Ledger,
    TerminalState,
    ToolPolicy,
    harness_hook,
)

SECRET = "zq7-CORAL-harbor-88421-tango"
"""An exact secret value (``secret_values``)."""


def _agent(h: Harness, script: list[Any], tools: list[Any], name: str = "shop") -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(script)
    kit = Toolkit(tools=[t if isinstance(t, ToolBase) else tool(t) for t in tools])
    return make_agent(model, h.instrument(kit), h.middlewares(), name=name), model


async def _reply(h: Harness, agent: Any, inputs: Any = None) -> tuple[list[Any], Any]:
    events, final = [], None
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(inputs or UserMsg("user", "go"), yield_final_msg=True):
            if hasattr(item, "get_text_content") and type(item).__name__.endswith("Msg"):
                final = item
            else:
                events.append(item)
    return events, final


async def _approve(h: Harness, agent: Any, events: list[Any]) -> tuple[list[Any], Any]:
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    return await _reply(h, agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]))


def _results(agent: Any, name: str) -> list[ToolResultBlock]:
    """The lead's stored results of the tool ``name``."""
    return [b for m in agent.state.context if not isinstance(m.content, str) for b in m.content
            if isinstance(b, ToolResultBlock) and b.name == name]


def _sub_runs(block: ToolResultBlock) -> list[dict[str, Any]]:
    return (block.metadata or {}).get("harness", {}).get("sub_runs", [])


def _price(usd_per_mtok: float) -> tuple[float, float]:
    return (usd_per_mtok, usd_per_mtok)


async def _lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): What.
    """
    return "no results for this query in the catalogue today"


# ====================================================== 1. tool-point hints


async def test_a_tool_point_hint_is_given_once_after_the_batchs_results() -> None:
    """README "Writing a hook": ``ctx.hint`` "never the same hint twice in a
    row; at a tool point, given before the model's next call". A gate hinting
    on both calls of a parallel batch: one hint, after both results (one
    between a call and its result breaks the provider's message order)."""

    @harness_hook("pre_tool_call", priority=60, name="heads_up")
    def heads_up(ctx: HookContext) -> None:
        ctx.hint("Search results are cached for an hour.", key="cache_note")

    ran = Ran()
    h = Harness(HarnessConfig(), hooks=[heads_up], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "a"}), ("search", {"q": "b"})), text("done")],
                          [searcher(ran)])
    await _reply(h, agent)
    sent = model.calls[1].formatted
    where = [i for i, m in enumerate(sent) if "cached for an hour" in json.dumps(m)]
    last_result = max(i for i, m in enumerate(sent) if m["role"] == "tool")
    assert len(where) == 1 and where[0] > last_result, sent
    assert "cached for an hour" not in json.dumps(model.calls[0].formatted)


async def test_a_tool_point_hint_is_not_given_in_shadow_mode() -> None:
    """Shadow mode decides and records; it gives the model nothing a live
    run would not have (``pre_think`` and ``post_reflect`` hints are not
    given either): a tool point's hint is recorded, not given."""

    @harness_hook("post_tool_call", priority=60, name="stale")
    def stale(ctx: HookContext) -> None:
        ctx.hint("That price list is from last year.", key="stale")

    ran = Ran()
    h = Harness(HarnessConfig(mode="shadow"), hooks=[stale], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    assert any(d.hook == "stale" and d.action == "hint" for d in h.last_report(agent).decisions)
    assert "from last year" not in json.dumps(model.calls[1].formatted)


async def test_a_tool_point_hint_quoting_a_secret_is_not_streamed_raw() -> None:
    @harness_hook("pre_tool_call", priority=60, name="logged_note")
    def note(ctx: HookContext) -> None:
        ctx.hint(f"Lookups of {ctx.tool.args['q']} are logged for audit.", key="logged")

    ran = Ran()
    h = Harness(HarnessConfig(secret_values=[SECRET]), hooks=[note], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": SECRET})), text("done")], [searcher(ran)])
    events, _ = await _reply(h, agent)
    hints = [d.detail for d in h.last_report(agent).decisions if d.hook == "logged_note"]
    assert hints and SECRET not in hints[0]  # the decision is redacted
    assert "logged for audit" in json.dumps(model.calls[1].formatted)  # and the hint was given
    leaked = [line[:160] for line in every_event(events).splitlines() if SECRET in line]
    assert leaked == [], leaked


# ====================================================== 2. constrain codes


async def test_a_hooks_constrain_code_is_the_reason_a_model_ignoring_it_ends_with() -> None:
    """README: ``ctx.constrain(reason, code)``: "a model that keeps calling
    other tools ends ``incomplete`` with ``code``"."""

    @harness_hook("post_tool_call", priority=60, name="one_search")
    def enough(ctx: HookContext) -> None:
        ctx.constrain("one search is enough for a price check", code="budget")

    ran = Ran()
    h = Harness(HarnessConfig(), hooks=[enough], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("x")],
                          [searcher(ran)])
    _, final = await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert "its budget is used up" in final.get_text_content()


async def test_a_text_answer_then_other_tools_ends_finish_tool_not_called() -> None:
    """README table, ``terminal_enforcer``: a text answer while a finishing
    tool is required gets a narrowed round; a model that then calls another
    tool ends ``incomplete``, ``finish_tool_not_called`` (not ``stalled``)."""

    async def submit(answer: str) -> str:
        """Submit.

        Args:
            answer (str): The answer.
        """
        return "submitted"

    config = HarnessConfig(tools={"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")})
    ran = Ran()
    h = Harness(config, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("Mugs are $4."), calls(("search", {"q": "b"})),
                          text("x")], [searcher(ran), submit])
    _, final = await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "finish_tool_not_called")
    assert "did not deliver its result" in final.get_text_content()


async def test_a_stalled_run_still_ends_stalled() -> None:
    """Regression guard: the stall ladder's constrain (its reason a
    sentence) still ends a model ignoring it ``stalled``, with the words
    "no progress was being made"."""
    h = Harness(HarnessConfig(stall_rounds=2), load_entry_points=False)
    script = [calls(("lookup", {"q": f"q{i}"})) for i in range(12)] + [text("x")]
    agent, _ = _agent(h, script, [_lookup])
    _, final = await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "stalled")
    assert "no progress was being made" in final.get_text_content()


# ====================================================== 3. bounded approval rules


async def test_an_ask_when_past_the_deadline_does_not_let_the_call_run() -> None:
    """README "Ask a human": ``ask_when`` is bounded "by the deadline, past
    which the call is not made"; the run ends ``incomplete``, ``deadline``."""

    async def slow_rule(args: dict) -> str | None:
        await asyncio.sleep(2.0)
        return None

    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=0.5, tools={"search": ToolPolicy(ask_when=slow_rule)}),
                load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    started = time.monotonic()
    await _reply(h, agent)
    report = h.last_report(agent)
    assert time.monotonic() - started < 1.2
    assert ran == [] and (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")


async def test_an_ask_when_that_swallows_its_timeout_still_asks() -> None:
    """README: "a rule that fails or times out before it asks: fail closed".
    A rule that catches the timeout's cancellation and answers "no need to
    ask" must not let the call run unapproved."""

    async def stubborn(args: dict) -> str | None:
        try:
            await asyncio.sleep(2.0)
        except asyncio.CancelledError:
            return None
        return "needs a human"

    ran = Ran()
    h = Harness(HarnessConfig(hook_timeout_s=0.2, tools={"search": ToolPolicy(ask_when=stubborn)}),
                load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    started = time.monotonic()
    events, _ = await _reply(h, agent)
    assert time.monotonic() - started < 1.2
    assert ran == [] and h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
    assert any(isinstance(e, RequireUserConfirmEvent) for e in events)


async def test_a_slow_count_results_is_bounded_by_the_hook_timeout() -> None:
    """CHANGELOG round 30: ``count_results`` is bounded by ``hook_timeout_s``;
    a timed-out count is a failed one (the defaults apply)."""

    async def slow_count(result: str) -> int:
        await asyncio.sleep(3.0)
        return 3

    ran = Ran()
    h = Harness(HarnessConfig(hook_timeout_s=0.2, tools={
        "search": ToolPolicy(role="retrieval", count_results=slow_count)}), load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    started = time.monotonic()
    await _reply(h, agent)
    assert time.monotonic() - started < 1.5
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED


async def test_a_remembered_approvals_async_when_is_bounded_by_the_deadline() -> None:
    async def slow_when(args: dict) -> bool:
        await asyncio.sleep(2.0)
        return True

    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=0.5, tools={"search": ToolPolicy(ask_when=lambda a: "needs a human")}),
                load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    h.approve(ALICE, agent.state.session_id, "search", when=slow_when)
    started = time.monotonic()
    await _reply(h, agent)
    took = time.monotonic() - started
    assert ran == []  # not fail open: the call is not made past the deadline
    assert took < 1.2, f"a 0.5 s deadline took {took:.1f} s"


# ====================================================== 4. a sub-agent's ending in the lead's result


def _refunding_child(h: Harness) -> tuple[Any, Ran]:
    ran = Ran()

    async def refund(order_id: str) -> str:
        """Refund.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A1"})), text("refund done")]),
                       h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="clerk")
    return child, ran


async def test_a_resumed_sub_agents_ending_is_in_the_result_of_the_call_that_resumed_it() -> None:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(ask_when=lambda a: "refunds need a human")}),
                load_entry_points=False)
    child, ran = _refunding_child(h)
    delegate, resume, _ = parking_tools(child)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund A1"})), calls(("resume", {"task": "ok"})),
                                     text("all done")]),
                      h.instrument(Toolkit(tools=[tool(delegate), tool(resume)])), h.middlewares(), name="lead")
    await _reply(h, lead)
    assert ran.of("refund") == [{"order_id": "A1"}]
    [parked] = _results(lead, "delegate")
    assert [s["terminal_state"] for s in _sub_runs(parked)] == ["waiting_input"]
    [resumed] = _results(lead, "resume")
    assert [s["terminal_state"] for s in _sub_runs(resumed)] == ["completed"], resumed.metadata


async def test_a_sub_agent_that_ended_in_a_call_cut_at_the_deadline_is_in_its_result() -> None:
    h = Harness(HarnessConfig(deadline_s=0.8), load_entry_points=False)
    child = make_agent(ScriptedModel([text("researched")]), [], h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher, then file the answer.

        Args:
            task (str): What.
        """
        msg = await child.reply(UserMsg("lead", task))
        await asyncio.sleep(3)
        return msg.get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(delegate)])), h.middlewares(), name="lead")
    await _reply(h, lead)
    assert [c.terminal_state for c in h.last_report(lead).children] == [TerminalState.COMPLETED]
    [cut] = _results(lead, "delegate")
    assert [s["terminal_state"] for s in _sub_runs(cut)] == ["completed"], cut.metadata


async def test_a_sub_agents_ending_is_in_the_leads_result() -> None:
    """Regression guard: the plain case, a sub-agent stopped by its hook."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(ScriptedModel([text("researched")]), [], h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("done")]),
                      h.instrument(Toolkit(tools=[tool(delegate)])), h.middlewares(), name="lead")
    await _reply(h, lead)
    [result] = _results(lead, "delegate")
    [sub] = _sub_runs(result)
    assert (sub["agent"], sub["terminal_state"]) == ("researcher", "completed")


async def test_a_sub_runs_reason_is_scrubbed_with_the_leads_secrets() -> None:
    @harness_hook("post_tool_call", priority=60, name="frozen_check")
    def frozen(ctx: HookContext) -> None:
        if "frozen" in ctx.result.text:
            ctx.stop(f"account {ctx.tool.args['account']} is frozen")

    async def balance(account: str) -> str:
        """Balance.

        Args:
            account (str): The account.
        """
        return "account frozen"

    lead_h = Harness(HarnessConfig(secret_values=[SECRET]), load_entry_points=False)
    sub_h = Harness(HarnessConfig(), hooks=[frozen], load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("balance", {"account": SECRET})), text("x")]),
                       sub_h.instrument(Toolkit(tools=[tool(balance)])), sub_h.middlewares(), name="teller")

    async def delegate(task: str) -> str:
        """Ask the teller.

        Args:
            task (str): What.
        """
        await child.reply(UserMsg("lead", task))
        return "the teller answered"

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("done")]),
                      lead_h.instrument(Toolkit(tools=[tool(delegate)])), lead_h.middlewares(), name="lead")
    events, _ = await _reply(lead_h, lead)
    [child_report] = lead_h.last_report(lead).children
    assert SECRET not in child_report.reason  # the children are rescrubbed
    [result] = _results(lead, "delegate")
    assert _sub_runs(result) and SECRET not in json.dumps(result.metadata)
    assert SECRET not in every_event(events)


# ====================================================== 5. the candidate policy


async def test_a_candidate_equal_to_the_live_policy_agrees_on_a_call_agentscope_asked_about() -> None:
    limits = [ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)]
    config = HarnessConfig(concurrency_limits=limits)
    ran = Ran()
    h = Harness(config, candidate=config, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [FunctionTool(searcher(ran))])
    events, _ = await _reply(h, agent)
    await _approve(h, agent, events)
    report = h.last_report(agent)
    assert len(ran) == 1 and report.terminal_state is TerminalState.COMPLETED
    assert report.candidate_differences == [], report.candidate_differences


async def test_a_candidate_equal_to_the_live_policy_agrees_after_a_ledger_extension() -> None:
    """Regression guard: a human's ledger extension, judged by an equal
    candidate (it offered the same extension): no difference."""
    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=3)},
    )
    ran = Ran()
    h = Harness(config, candidate=config, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                          calls(("search", {"q": "c"})), text("done")], [searcher(ran)])
    events, _ = await _reply(h, agent)
    await _approve(h, agent, events)
    report = h.last_report(agent)
    assert len(ran) == 3 and report.extensions
    assert report.candidate_differences == [], report.candidate_differences


async def test_a_candidate_equal_to_the_live_policy_agrees_after_a_budget_extension() -> None:
    config = HarnessConfig(cost=CostPolicy(cap_usd=0.15, prices={"scripted": _price(1000.0)}, on_exhausted="ask"))
    ran = Ran()
    h = Harness(config, candidate=config, load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    assert h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
    assert h.last_report(agent).candidate_differences == []
    with h.acting_for(ALICE):
        h.extend(agent, 1.0)
    await _reply(h, agent, UserMsg("user", "yes, continue"))
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED and len(model.calls) == 2
    assert report.candidate_differences == [], report.candidate_differences


async def test_a_candidate_equal_to_the_live_policy_counts_a_sub_agent_of_another_harness() -> None:
    config = HarnessConfig(cost=CostPolicy(cap_usd=2.0, prices={"scripted": _price(1000.0)}))
    lead_h = Harness(config, candidate=config, load_entry_points=False)
    sub_h = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(ScriptedModel([text("researched", inp=1500)]), [], sub_h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("done")]),
                      lead_h.instrument(Toolkit(tools=[tool(delegate)])), lead_h.middlewares(), name="lead")
    await _reply(lead_h, lead)
    report = lead_h.last_report(lead)
    assert report.terminal_state is TerminalState.COMPLETED and report.spent_usd > 1.5  # the sub-agent's spend
    assert report.candidate_differences == [], report.candidate_differences


def _no_usage(resp: ChatResponse) -> ChatResponse:
    return ChatResponse(content=resp.content, is_last=True, usage=None)


async def test_a_candidate_is_charged_an_estimate_when_the_provider_reports_no_usage() -> None:
    cand = HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"scripted": _price(1000.0)}))
    script = [calls(("search", {"q": f"q{i}"}), inp=400) for i in range(6)] + [text("done", inp=400)]
    h = Harness(HarnessConfig(), candidate=cand, load_entry_points=False)
    agent, model = _agent(h, script, [searcher(Ran())])
    await _reply(h, agent)
    assert h.last_report(agent).candidate_differences  # with usage: the cap is judged
    estimated = sum(turn.payload_tokens for turn in model.calls) * 1000.0 / 1e6
    assert estimated > 2.0  # what the estimates alone come to: twice the candidate's cap
    h = Harness(HarnessConfig(), candidate=cand, load_entry_points=False)
    agent, _ = _agent(h, [_no_usage(s) for s in script], [searcher(Ran())])
    await _reply(h, agent)
    assert h.last_report(agent).candidate_differences, "a capped candidate spent nothing on 7 calls"


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states ('Candidate policies', Limit): the candidate's gates run on the "
    "live call's path, so a custom async gate is awaited twice: a 0.3 s fraud-check gate makes "
    "the live call wait 0.6 s (candidate.py Candidate._judge_call awaits its own runner inline)"))
async def test_a_candidate_never_delays_the_live_call_with_a_custom_gate() -> None:
    seen: list[str] = []

    @harness_hook("pre_tool_call", priority=60, name="fraud_check", kind="safety")
    async def fraud_check(ctx: HookContext) -> None:
        seen.append(ctx.tool.name)
        await asyncio.sleep(0.3)

    async def one(candidate: HarnessConfig | None) -> float:
        h = Harness(HarnessConfig(), hooks=[fraud_check], candidate=candidate, load_entry_points=False)
        agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(Ran())])
        started = time.monotonic()
        await _reply(h, agent)
        return time.monotonic() - started

    alone = await one(None)
    assert seen == ["search"]
    beside = await one(HarnessConfig(max_tool_calls=5))
    assert len(seen) == 2, f"the gate ran {len(seen) - 1} times for one live call"
    assert beside < alone + 0.15, (alone, beside)


async def test_a_candidate_does_not_change_what_the_model_sees() -> None:
    """Regression guard: a candidate that discloses its budget every call,
    has a ledger of one and a cap: the live payloads are byte for byte those
    of the live policy alone."""
    cand = HarnessConfig(disclose_budget="every_call",
                         cost=CostPolicy(cap_usd=0.2, prices={"scripted": _price(1000.0)}),
                         tools={"search": ToolPolicy(role="retrieval", ledgers=["web"])},
                         ledgers={"web": Ledger(cap=1)})

    async def payloads(candidate: HarnessConfig | None) -> list[str]:
        h = Harness(HarnessConfig(), candidate=candidate, load_entry_points=False)
        agent, model = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
                              [searcher(Ran())])
        await _reply(h, agent)
        assert h.last_report(agent).terminal_state is TerminalState.COMPLETED
        # fences carry a per-run nonce, calls a fresh id: the rest is compared as sent
        return [re.sub(r'nonce=\\"[0-9a-f]+|call_[0-9a-f]+', "X", json.dumps(t.formatted, sort_keys=True))
                for t in model.calls]

    alone, beside = await payloads(None), await payloads(cand)
    assert len(alone) == 3 and beside == alone
    assert "harness:budget" not in "".join(beside)


def _holds_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "_Holds")


async def test_a_candidate_keeps_nothing_after_its_runs_end() -> None:
    limits = [ConcurrencyLimit(scope="tool", tool="search", max_in_flight=2)]
    config = HarnessConfig(concurrency_limits=limits)
    h = Harness(config, candidate=config, load_entry_points=False)
    before = _holds_alive()
    for i in range(6):
        agent, _ = _agent(h, [calls(("search", {"q": f"a{i}"})), text("done")], [searcher(Ran())])
        await _reply(h, agent)
        assert h.last_report(agent).candidate_differences == []
        del agent
    await asyncio.sleep(0.05)
    assert _holds_alive() - before <= 1

"""Round 154 (a: a red team on round 153's fixes; b: scenarios on "Writing a hook" and the
env flags, about 56 held).

a 1. Calls a guard placed first answered the permission check for were refused and
     counted (round 153 b) but never met the refusal ladder: the run went on to `stalled`
     eight model calls later, where a refusal met again ends `refused:<code>` (asserted in
     tests/ecosystem/test_round153b_outer_middlewares.py).
a 2. A policy compared with itself as its candidate differed in `DONT_ASK` mode ("live:
     refuse:permission_denied; candidate: ask"): the candidate refuses as the live side.
b 1. A bound method given twice (`hooks=[common, counter.check]`, one instance) was
     refused as "two hooks are named ..." (each access makes a new bound method): one hook.
b 2. A hook that set `ctx.result.text` to something not text (a helper that forgot to
     return) did not fail: the earlier text stood silently, the customer's e-mail reached
     the model past a `fail_closed` rewriter. It fails, put back, as `final_text` does.
b 3. A hook's second hint with another text was dropped unrecorded (the key defaulted to
     the hook's name): a hook of yours is keyed by its name and the text.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import RequireExternalExecutionEvent, RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionMode

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HookContext,
    MemoryStore,
    TerminalState,
    ToolPolicy,
    ToolResultContext,
    harness_hook,
)
from tests.ecosystem.test_round153b_outer_middlewares import AllowList
from tests.redteam.test_redteam_round153a_candidate_asks import four_eyes
from tests.scripted import ALICE, RAN, ScriptedModel, calls, client_tool, drain, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("asker", ["hook", "ask_when"])
async def test_a_policy_compared_with_itself_in_dont_ask_mode_differs_nowhere(asker: str) -> None:
    RAN.clear()
    if asker == "hook":
        h = Harness(HarnessConfig(), hooks=[four_eyes], candidate=HarnessConfig(), load_entry_points=False,
                    environ={})
    else:
        same: dict[str, Any] = {"tools": {"search": ToolPolicy(ask_when=lambda a: "searches need a human")}}
        h = Harness(HarnessConfig(**same), candidate=HarnessConfig(**same), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("It needs your approval.")]),
                       [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert RAN == [] and report.refusals == {"permission_denied": 1}
    assert report.candidate_differences == [], report.candidate_differences


class Counter:
    def __init__(self) -> None:
        self.seen = 0

    @harness_hook("pre_tool_call", name="search_counter")
    def check(self, ctx: HookContext) -> None:
        self.seen += 1


async def test_a_bound_method_given_twice_is_one_hook() -> None:
    counter = Counter()
    h = Harness(HarnessConfig(), hooks=[[counter.check], counter.check], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("ok")]), [search], h.middlewares())
    await run(agent, "go")
    assert counter.seen == 1


async def leaky(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return f"{q}: jane.doe@example.com"


@harness_hook("post_tool_call", priority=12, name="pii_rewriter", kind="transform", fail_closed=True)
def pii_rewriter(ctx: ToolResultContext) -> None:
    ctx.result.text = None  # type: ignore[assignment]  # the team's helper forgot to return


async def test_a_hook_that_sets_result_text_to_no_text_fails() -> None:
    h = Harness(HarnessConfig(), hooks=[pii_rewriter], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("leaky", {"q": "jane"})), text("ok")])
    agent = make_agent(model, [leaky], h.middlewares())
    await run(agent, "go")
    report = h.last_report(agent)
    failed = [d for d in report.decisions if d.hook == "pii_rewriter" and d.action == "error"]
    assert failed and "ctx.result.text to NoneType" in failed[0].detail, report.decisions
    assert "jane.doe@example.com" not in model.calls[1].last_result
    assert report.refusals.get("policy_error") == 1


async def test_another_text_of_a_hooks_hint_is_given() -> None:
    left = {"n": 3}

    @harness_hook("post_tool_call", name="search_countdown")
    def countdown(ctx: ToolResultContext) -> None:
        left["n"] -= 1
        ctx.hint(f"{left['n']} searches left in this chat.")

    h = Harness(HarnessConfig(), hooks=[countdown], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("ok")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent, "go")
    assert "2 searches left" in json.dumps(model.calls[1].formatted)
    assert "1 searches left" in json.dumps(model.calls[2].formatted)


@pytest.mark.xfail(strict=True, reason="README limit: a client-run call a guard before the harness allowed is "
                                       "handed to the client unjudged")
async def test_a_client_run_call_a_guard_allowed_is_not_handed_to_the_client_unjudged() -> None:
    """Round 154 a: the "not judged" refusal is made where the harness runs a call
    (`on_acting`), which a client-run call never reaches."""
    h = Harness(HarnessConfig(tools={"verify_code": ToolPolicy(ask_when=lambda a: "codes need a human")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "123"})), text("Checked."), text("x")])
    agent = make_agent(model, [client_tool()], [AllowList("verify_code"), *h.middlewares()])
    with h.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "check my code"))
    handed = [i for i in items if isinstance(i, RequireExternalExecutionEvent)]
    asked = [i for i in items if isinstance(i, RequireUserConfirmEvent)]
    assert handed == [] or asked


SECRET = "s3cr3t-value-0xDEADBEEF-prod"


@harness_hook("post_tool_call", name="quoting_hinter")
def quoting_hinter(ctx: ToolResultContext) -> None:
    ctx.hint(f"the search said the token is {SECRET}; do not use it")


async def test_a_hint_quoting_a_secret_is_kept_nowhere_unredacted() -> None:
    """Round 155 a: round 154's default key of a hook's hint was "<name>: <text>", the raw
    text, kept in `facts.last_hint` and so in the park record other workers read. The key
    is a digest of the text as shaped."""
    RAN.clear()
    store = MemoryStore()
    cfg = HarnessConfig(store=store, secret_values=[SECRET],
                        tools={"search": ToolPolicy(ask_when=lambda a: "second search needs a human"
                                                    if a.get("q") == "b" else None)})
    h = Harness(cfg, hooks=[quoting_hinter], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("x")])
    agent = make_agent(model, [search], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.WAITING_INPUT
    assert SECRET not in json.dumps(model.calls[1].formatted)
    assert SECRET not in report.model_dump_json()
    assert SECRET not in (await store.park_get(report.run_id) or "")


@harness_hook("post_tool_call", priority=12, name="pending_notice", kind="transform", fail_closed=True)
def pending_notice(ctx: ToolResultContext) -> None:
    ctx.result.notices = ("Refund REF-77 is still pending.",)  # type: ignore[assignment]


async def test_a_hook_that_replaces_notices_with_no_list_fails() -> None:
    """Round 155 a: notices replaced by a tuple were silently dropped (the hook neither
    failed nor was its notice given): it fails, as a non-text `result.text` does."""
    h = Harness(HarnessConfig(), hooks=[pending_notice], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent, "go")
    report = h.last_report(agent)
    failed = [d for d in report.decisions if d.hook == "pending_notice" and d.action == "error"]
    assert failed and "ctx.result.notices to tuple" in failed[0].detail
    assert report.refusals.get("policy_error") == 1  # fail_closed: the result is withheld

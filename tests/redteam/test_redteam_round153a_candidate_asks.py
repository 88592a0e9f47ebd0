"""Round 153 a, continued: round 152 a recorded a hook's `ask` only when the call is put
to a human; the candidate comparison and shadow mode were left on the old rule.

README "Candidate policies": differences are `candidate_differs` decisions. A hook's
`ctx.ask` was compared as "ask" at once: a call a remembered approval covered (run by
both sides) was a difference "live: ask; candidate: allow", and a call refused in
`DONT_ASK` mode was said asked (also for `ask_when`); a candidate's own hook asking was
never covered by a remembered approval. Now the live side is compared where the call is
put to a human (`CallFlow.asked`), refused for nobody to ask, or admitted.
README `mode`: shadow "decide and record, refuse nothing": in `DONT_ASK` mode it recorded
a question nobody could be asked; it records the (not enforced) `permission_denied`
refusal enforcing would make, under the asker.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.permission import PermissionMode

from agentscope_harness import Harness, HarnessConfig, HookContext, ToolPolicy, harness_hook
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


@harness_hook("pre_tool_call", priority=25, name="four_eyes", kind="observer")
def four_eyes(ctx: HookContext) -> None:
    if ctx.tool.name == "search":
        ctx.ask("searches need a human")


def _harness(**live: Any) -> Harness:
    return Harness(HarnessConfig(**live), hooks=[four_eyes], candidate=HarnessConfig(disabled_hooks={"four_eyes"}),
                   load_entry_points=False, environ={})


async def test_a_call_a_remembered_approval_covers_is_no_candidate_difference() -> None:
    RAN.clear()
    h = _harness()
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    h.approve(ALICE, agent.state.session_id, "search", ttl_s=600)
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert [d.action for d in report.decisions if d.hook == "remembered_approval"] == ["allow_remembered"]
    assert report.candidate_differences == [], report.candidate_differences


@pytest.mark.parametrize("asker", ["hook", "ask_when"])
async def test_dont_ask_mode_difference_says_the_live_policy_refused(asker: str) -> None:
    RAN.clear()
    if asker == "hook":
        h = _harness()
    else:
        h = Harness(HarnessConfig(tools={"search": ToolPolicy(ask_when=lambda a: "searches need a human")}),
                    candidate=HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("It needs your approval.")]),
                       [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert report.refusals == {"permission_denied": 1}
    lives = [d["live"] for d in report.candidate_differences]
    assert lives == ["refuse:permission_denied"], report.candidate_differences


async def test_a_candidates_own_hook_ask_is_covered_by_a_remembered_approval_too() -> None:
    """The mirror case: the hook runs in the candidate only (the live policy disables it).
    A remembered approval covers the call, as `_asks` checks for the candidate's
    `ask_when`; `Candidate._judge_call` answers "ask" for any `ctx.ask` without it."""
    RAN.clear()
    h = Harness(HarnessConfig(disabled_hooks={"four_eyes"}), hooks=[four_eyes], candidate=HarnessConfig(),
                load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    h.approve(ALICE, agent.state.session_id, "search", ttl_s=600)
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert len(RAN) == 1, RAN  # the live call ran, unasked
    assert report.candidate_differences == [], report.candidate_differences


@pytest.mark.parametrize("asker", ["four_eyes", "ask_when"])
async def test_shadow_mode_records_what_enforcing_would_do_with_nobody_to_ask(asker: str) -> None:
    RAN.clear()
    kw: dict[str, Any] = {"mode": "shadow"}
    if asker == "ask_when":
        kw["tools"] = {"search": ToolPolicy(ask_when=lambda a: "searches need a human")}
    h = Harness(HarnessConfig(**kw), hooks=[four_eyes] if asker == "four_eyes" else [],
                load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("done")]), [search], h.middlewares())
    agent.state.permission_context.mode = PermissionMode.DONT_ASK
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert RAN == ["a"]  # shadow: the call runs
    asks = [d.hook for d in report.decisions if d.action == "ask"]
    refused = [d.hook for d in report.decisions if d.code == "permission_denied"]
    assert (asks, refused) == ([], [asker]), [(d.hook, d.action, d.code) for d in report.decisions]

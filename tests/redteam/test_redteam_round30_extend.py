"""Red team, round 30: the 0.2 extension points, from a user's side.

1. hook verbs: ``ctx.hint`` from a tool-point hook (``pre_tool_call``,
   ``post_tool_call``), ``ctx.stop`` / ``ctx.constrain`` from a custom hook;
2. the candidate config (``Harness(config, candidate=...)``): a candidate
   that adds a USD cap or a price the live policy lacks, a candidate with
   the live policy's own limits, a candidate whose rate limit waits, a
   hook switched off by ``HARNESS_DISABLED_HOOKS``, the ``enforced`` flag of
   ``candidate_differs``;
3. the budget status line (``disclose_budget``) after a human extended a
   ledger (``Ledger(on_exhausted="ask")``);
4. a structured reply (AgentScope's ``structured_schema``) made to conclude
   (the wrap-up window, a hook's ``ctx.constrain`` or ``ctx.stop``).

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from hookkit import Ran, searcher
from pydantic import BaseModel
from scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    Ledger,
    RateLimit,
    TerminalState,
    ToolPolicy,
    harness_hook,
)


def _agent(h: Harness, script: list[Any], tools: list[Any], **kw: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(script, **kw)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(t) for t in tools])), h.middlewares())
    return agent, model


async def _reply(h: Harness, agent: Any, inputs: Any = None) -> tuple[list[Any], Any]:
    events, final = [], None
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(inputs or UserMsg("user", "go"), yield_final_msg=True):
            if hasattr(item, "get_text_content") and type(item).__name__.endswith("Msg"):
                final = item
            else:
                events.append(item)
    return events, final


def _told(model: ScriptedModel, i: int) -> str:
    return json.dumps(model.calls[i].formatted, ensure_ascii=False)


# ====================================================== 1. hook verbs


STALE = "That price list is from last year; check the current one before quoting it."



async def test_a_hint_from_a_post_tool_call_hook_reaches_the_model() -> None:
    """README "Writing a hook": ``ctx.hint(text, key)`` is a verb of every
    point (DESIGN 3.2: "Hook verbs on HookContext (every point)"); its
    docstring: "Tell the model something before its next call". A
    ``post_tool_call`` hook that reads a result and hints must reach the
    model's next call."""

    @harness_hook("post_tool_call", priority=60, name="staleness")
    def staleness(ctx: HookContext) -> None:
        if "2023" in ctx.result.text:
            ctx.hint(STALE, key="stale")

    async def prices(q: str) -> str:
        """Price list.

        Args:
            q (str): What.
        """
        return f"price list 2023 for {q}: mugs $4"

    h = Harness(HarnessConfig(), hooks=[staleness], load_entry_points=False)
    agent, model = _agent(h, [calls(("prices", {"q": "mugs"})), text("Mugs are $4.")], [prices])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert any(d.hook == "staleness" and d.action == "hint" for d in report.decisions)
    assert STALE in _told(model, 1), "the recorded hint never reached the model"



async def test_a_hint_from_a_pre_tool_call_hook_reaches_the_model() -> None:
    """The same verb at ``pre_tool_call``: a gate that lets a call through
    but wants the model to know something (a recorded hint the model never
    reads is a report that lies about what the model was told)."""

    @harness_hook("pre_tool_call", priority=60, name="heads_up")
    def heads_up(ctx: HookContext) -> None:
        if ctx.tool.name == "search":
            ctx.hint("Search results are cached for an hour.", key="cache_note")

    ran = Ran()
    h = Harness(HarnessConfig(), hooks=[heads_up], load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "mugs"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert any(d.hook == "heads_up" and d.action == "hint" for d in report.decisions)
    assert "Search results are cached for an hour." in _told(model, 1)


# ====================================================== 2. the candidate


def _price(usd_per_mtok: float) -> tuple[float, float]:
    return (usd_per_mtok, usd_per_mtok)


async def test_a_candidate_usd_cap_the_live_policy_lacks_is_judged() -> None:
    """README "Candidate policies": the candidate is judged "in shadow on the
    same traffic (tool gates and pre-call budget decisions)". The mainstream
    rollout: live runs without a budget, the candidate adds ``cap_usd`` with
    prices. Each call costs $0.11 at the candidate's prices (110 tokens at
    $1000 / M); its cap of $0.10 is spent after the first call, so from the
    second call on the candidate would answer the fallback (``budget``)."""
    cand = HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices={"scripted": _price(1000.0)}))
    ran = Ran()
    h = Harness(HarnessConfig(), candidate=cand, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
                      [searcher(ran)])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED  # the live run is untouched
    assert any(d.get("candidate", "").startswith("fallback") for d in report.candidate_differences), (
        report.candidate_differences)


async def test_a_candidate_cap_at_the_live_prices_is_judged() -> None:
    """Regression guard: the same cap, the live policy priced the same
    (uncapped): the candidate's ladder sees the spend and differs."""
    live = HarnessConfig(cost=CostPolicy(prices={"scripted": _price(1000.0)}))
    cand = HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices={"scripted": _price(1000.0)}))
    ran = Ran()
    h = Harness(live, candidate=cand, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
                      [searcher(ran)])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED
    assert any(d.get("candidate", "").startswith("fallback") for d in report.candidate_differences)


async def test_a_candidate_that_cannot_price_the_model_is_judged() -> None:
    """README: "no model runs unpriced on a capped budget" (``unpriced_model``:
    "the fallback text; the model is never called"). A candidate whose
    ``prices`` name the model under another spelling would refuse every
    call of the run: that is a pre-call budget decision of the candidate,
    and it differs from the live one on the very first call."""
    cand = HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices={"gpt-4o": _price(2.5)}))
    h = Harness(HarnessConfig(), candidate=cand, load_entry_points=False)
    agent, model = _agent(h, [text("Hello.")], [])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert len(model.calls) == 1 and report.terminal_state is TerminalState.COMPLETED
    assert report.candidate_differences, "the candidate would never call the model; no difference recorded"


async def test_a_candidate_with_the_live_concurrency_limit_agrees_with_it() -> None:
    """A candidate equal to the live policy decides as it does: no
    ``candidate_differs``. With a tool concurrency limit of 1 and calls made
    one after another, every call gets its slot, live and candidate alike."""
    limits = [ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1)]
    config = HarnessConfig(concurrency_limits=limits)
    ran = Ran()
    h = Harness(config, candidate=HarnessConfig(concurrency_limits=limits), load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                          calls(("search", {"q": "c"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert len(ran.of("search")) == 3
    assert report.candidate_differences == [], report.candidate_differences


async def test_a_candidate_with_the_live_ledgers_agrees_with_it() -> None:
    """Regression guard: a candidate equal to the live policy (a ledger of
    2, a third call refused) records no difference."""
    config = HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["web"])},
                           ledgers={"web": Ledger(cap=2)})
    ran = Ran()
    h = Harness(config, candidate=config, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                          calls(("search", {"q": "c"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    report = h.last_report(agent)
    assert len(ran.of("search")) == 2 and report.refusals == {"quota_exhausted": 1}
    assert report.candidate_differences == [], report.candidate_differences


async def test_a_candidate_difference_is_not_recorded_as_enforced() -> None:
    """DESIGN 3.1: ``Decision.enforced`` is false for what was not enforced
    ("false in shadow mode"); README: the candidate is judged "in shadow"
    and "never charges, claims or shows anything". Its refusal of a call
    the live policy ran (a ledger of 1 the live policy lacks) is recorded,
    in the report and the ``harness.decision`` event, as ``enforced: true``:
    a dashboard counting enforced ``quota_exhausted`` decisions counts a
    refusal that never happened."""
    cand = HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["web"])},
                         ledgers={"web": Ledger(cap=1)})
    ran = Ran()
    h = Harness(HarnessConfig(), candidate=cand, load_entry_points=False)
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
                      [searcher(ran)])
    events, _ = await _reply(h, agent)
    report = h.last_report(agent)
    assert len(ran.of("search")) == 2 and report.refusals == {}
    differs = [d for d in report.decisions if d.action == "candidate_differs"]
    assert differs and differs[0].code == "quota_exhausted"
    streamed = [e.value for e in events if getattr(e, "name", None) == "harness.decision"
                and e.value.get("action") == "candidate_differs"]
    assert [d.enforced for d in differs] == [False] and [d["enforced"] for d in streamed] == [False]


async def _fetch_batch(candidate: HarnessConfig | None) -> Any:
    """One round of 31 parallel 1 s fetches under a 2.5 s deadline, then an
    answer: the live report."""

    async def fetch(url: str) -> str:
        """Fetch.

        Args:
            url (str): The page.
        """
        await asyncio.sleep(1.0)
        return f"page {url}: {url * 3}"

    h = Harness(HarnessConfig(deadline_s=2.5), candidate=candidate, load_entry_points=False)
    agent, _ = _agent(h, [calls(*[("fetch", {"url": f"u{i}"}) for i in range(31)]), text("done")], [fetch])
    await _reply(h, agent)
    return h.last_report(agent)


async def test_a_candidates_rate_limit_never_delays_the_live_call() -> None:
    """README "Candidate policies": the candidate is judged "in shadow"; it
    "never charges, claims or shows anything" (candidate.py: it "enforces
    nothing and changes nothing"). A candidate trying a rate limit of 30
    fetches a minute with a wait (``wait_s=3``): its 31st call waits 2 s for
    the candidate's bucket, in the live call's judging, so the live run
    (1 s of work in a 2.5 s deadline) is cut at its deadline and ends
    ``incomplete`` (``deadline``) where the same live policy alone completes."""
    alone = await _fetch_batch(None)
    assert alone.terminal_state is TerminalState.COMPLETED, alone.reason
    cand = HarnessConfig(deadline_s=2.5, rate_limits=[
        RateLimit(scope="tool", tool="fetch", calls_per_min=30, wait_s=3)])
    report = await _fetch_batch(cand)
    assert report.terminal_state is TerminalState.COMPLETED, report.reason


async def test_a_hook_disabled_by_the_incident_switch_does_not_run_for_the_candidate() -> None:
    """README "Env flags": ``HARNESS_DISABLED_HOOKS=a,b`` drops named hooks
    (an incident switch: a hook whose service hangs). With a candidate
    config beside the live one, the dropped hook still runs on every live
    call (the candidate judges with every hook its own config keeps): the
    hook the operator switched off is called, and its 0.3 s hang still
    delays each live call."""
    called: list[str] = []

    @harness_hook("pre_tool_call", priority=25, name="fraud_check", kind="safety")
    async def fraud_check(ctx: HookContext) -> None:
        called.append(ctx.tool.name)
        await asyncio.sleep(0.3)

    ran = Ran()
    config = HarnessConfig()
    h = Harness(config, hooks=[fraud_check], candidate=HarnessConfig(max_tool_calls=5),
                environ={"HARNESS_DISABLED_HOOKS": "fraud_check"}, load_entry_points=False)
    assert "fraud_check" not in {s.name for s in h.hooks}
    agent, _ = _agent(h, [calls(("search", {"q": "a"})), text("done")], [searcher(ran)])
    await _reply(h, agent)
    assert len(ran.of("search")) == 1
    assert called == [], f"the switched-off hook ran {len(called)} time(s)"


# ====================================================== 3. the status line after an extension


async def test_the_status_line_counts_an_approved_ledger_extension() -> None:
    """README "Budgets users can see": the status line tells the model what
    is left (``retrieval 2/8 left``); ``Ledger(cap, on_exhausted="ask",
    extend_by=...)``: a human approves more. After approving 3 more calls
    of a spent ledger of 1 (and one of them used), 2 are left: the model is
    told so, not that the ledger is spent."""
    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=1, on_exhausted="ask", extend_by=3)},
        disclose_budget="every_call",
    )
    ran = Ran()
    h = Harness(config, load_entry_points=False)
    agent, model = _agent(h, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                              text("done")], [searcher(ran)])
    events, _ = await _reply(h, agent)
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    await _reply(h, agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[
        ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]))
    report = h.last_report(agent)
    assert len(ran.of("search")) == 2, ran
    assert report.extensions and report.extensions[0]["by"] == 3, report.extensions
    last = _told(model, len(model.calls) - 1)
    assert "retrieval 2/4 left" in last or "retrieval 2/" in last, last[-600:]


# ====================================================== 4. structured output under a forced conclusion


class _Answer(BaseModel):
    product: str
    price: float


OUTPUT = ("GenerateStructuredOutput", {"product": "mug", "price": 4.0})


async def _structured(h: Harness, script: list[Any]) -> tuple[Any, Any, ScriptedModel]:
    ran = Ran()
    agent, model = _agent(h, script, [searcher(ran)])
    with h.acting_for(ALICE):
        msg = await agent.reply(UserMsg("user", "which mug?"), structured_schema=_Answer)
    return msg, h.last_report(agent), model


async def test_a_structured_reply_that_concludes_in_its_wrap_up_window_completes() -> None:
    """README: near the deadline the watchdog constrains; ``force_conclude``
    narrows ``tool_choice`` to "the structured-output tool when a structured
    reply is owed"; "``wrap_up_s`` equal to ``deadline_s`` means conclude
    from the start". The model does exactly that: its first call gives the
    structured output. It is delivered, yet the run is reported
    ``incomplete`` (``stalled``): the call it was narrowed to is counted as
    "kept calling other tools after being told to conclude"."""
    h = Harness(HarnessConfig(deadline_s=5, wrap_up_s=5), load_entry_points=False)
    msg, report, model = await _structured(h, [calls(OUTPUT), text("x")])
    assert "GenerateStructuredOutput" in str(model.calls[0].tool_choice)
    assert msg.structured_output == {"product": "mug", "price": 4.0}
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)


async def test_a_structured_reply_a_hook_constrained_completes_with_its_output() -> None:
    """README "Writing a hook": ``ctx.constrain(reason)`` is the second rung
    ("from the next model call on, tool_choice is narrowed"); "A model that
    keeps calling other tools after being constrained: incomplete". A
    custom hook constrains after one search; the model answers with the
    structured output it was narrowed to. The same hook on a text reply
    ends ``completed`` (``answered``); the structured reply is reported
    ``incomplete`` (``stalled``) though nothing stalled."""

    @harness_hook("post_tool_call", priority=60, name="one_search_is_enough")
    def enough(ctx: HookContext) -> None:
        ctx.constrain("one search is enough")

    h = Harness(HarnessConfig(), hooks=[enough], load_entry_points=False)
    msg, report, _ = await _structured(h, [calls(("search", {"q": "mug"})), calls(OUTPUT), text("x")])
    assert msg.structured_output == {"product": "mug", "price": 4.0}
    assert report.reason != "stalled" and report.terminal_state is TerminalState.COMPLETED, (
        report.terminal_state, report.reason)


async def test_a_structured_reply_a_hook_stopped_still_gets_its_output() -> None:
    """Regression guard: ``ctx.stop`` at ``post_tool_call`` on a structured
    reply: one round narrowed to the output, the output delivered, the run
    ``incomplete`` with the hook's reason."""

    @harness_hook("post_tool_call", priority=60, name="stop_after_search")
    def stopper(ctx: HookContext) -> None:
        ctx.stop("policy_x")

    h = Harness(HarnessConfig(), hooks=[stopper], load_entry_points=False)
    msg, report, model = await _structured(h, [calls(("search", {"q": "mug"})), calls(OUTPUT), text("x")])
    assert "GenerateStructuredOutput" in str(model.calls[-1].tool_choice)
    assert msg.structured_output == {"product": "mug", "price": 4.0}
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "policy_x")

"""Red team rounds 165 b and 166 a: what a withheld result brings, and the ladders' hints.

A result the harness withheld still counted as the round's progress (the
ladders never climbed on a tool whose every result was ``pii_blocked``); an
exploring hint given before the run was constrained, and a next-step notice
after, reached a model told to conclude; two ladders hinting in one round took
turns, so each hint was given again in consecutive rounds. Real Agent, real
tools in a real Toolkit. Round 166 a: a text answer's round that then
constrained the run still gave its exploring hint, and a result a user's hook
withheld after the drift tracker still counted as news.
"""

from __future__ import annotations

import itertools

from agentscope.model import ChatResponse
from hookkit import Ran, drive, harnessed, hint_texts, shop_tools
from scripted import calls, text

from agentscope_harness import HarnessConfig, HookRejectSignal, Prerequisite, Principal, ToolPolicy, harness_hook

U42 = Principal(user_id="u-42", tenant="acme")


def _tools(ran: Ran):
    t = shop_tools(ran)

    async def ping(n: int) -> str:
        """Check the service.

        Args:
            n (int): The attempt.
        """
        ran.append(("ping", {"n": n}))
        return "pong: the service answers"

    return [ping, t["lookup_order"], t["cancel_order"], t["submit"]]


def _config(**kw) -> HarnessConfig:
    return HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
            "cancel_order": ToolPolicy(
                role="mutation", identity_args={"user_id": "user_id"},
                requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])],
            ),
            "submit": ToolPolicy(role="finish"),
        },
        stall_rounds=2, max_enforce_retries=0, **kw,
    )


CANCEL = ("cancel_order", {"order_id": "o1", "user_id": "u-42"})


def _catalogue(ran: Ran):
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return "3 products: red mug, blue mug, green mug"

    return search


def _searching(turn) -> ChatResponse:
    """A model searching with a new query each round until it is narrowed, then concluding."""
    mode = getattr(turn.tool_choice, "mode", turn.tool_choice)
    if mode not in (None, "auto"):
        return text("I could not find it.")
    return calls(("search", {"q": f"customer {len(turn.formatted)}"}))


async def test_no_exploring_hint_reaches_a_constrained_model():
    """README "The hooks" (after the table): "Corrective pressure climbs one
    ladder, the same hint is never given twice in a row, and no hint invites
    exploring once the run is constrained."

    Attack: the drift detector's "change approach" hint (an exploring hint,
    ``EXPLORING_HINTS``) is given at post_reflect of a round that calls tools,
    so it is deferred to the next pre_think; in that same round's batch the
    model meets a refusal again, so at that pre_think ``liveness_watchdog``
    constrains the run. The deferred exploring hint is delivered anyway,
    beside "conclude now", to a model whose tool_choice is narrowed to submit.
    """
    ran = Ran()
    script = [
        calls(("ping", {"n": 1})),             # news (first result)
        calls(CANCEL),                        # refused prerequisite_missing (first meeting)
        calls(("ping", {"n": 2})),             # nothing new
        calls(("ping", {"n": 3}), CANCEL),     # post_reflect: 2 idle rounds -> drift hint (deferred);
                                              # cancel refused again -> constrain at next pre_think
        calls(("submit", {"answer": "could not cancel o1"})),
        text("done"),
    ]
    h, model, agent = harnessed(_config(), script, _tools(ran))
    _, final, report = await drive(h, agent, U42)
    constrained = [c for c in model.calls if getattr(c["tool_choice"], "mode", None) == "submit"]
    assert constrained, [c["tool_choice"] for c in model.calls]
    first = constrained[0]
    hints = hint_texts(first)
    # the constrain rung was reached in this call
    assert any("refused again" in h_ for h_ in hints), hints
    told_now = hints[len(hint_texts(model.calls[model.calls.index(first) - 1])):]
    assert not any("Change approach" in h_ or "going round in circles" in h_ or "Search again" in h_
                   or "Widen the search" in h_ for h_ in told_now), told_now


async def test_no_next_step_notice_invites_work_once_constrained():
    """README "The hooks" (after the table): "no hint invites exploring once the
    run is constrained"; row 17 transition_notice: "On a progress edge ...
    appends the next step" (recorded as a `hint` decision).

    Attack: in one batch the model retries a tool whose dependency went down
    (tool_breaker_gate constrains the run at once: "A model that retries a tool
    after its `dependency_down` sentinel is constrained to conclude at once")
    and calls a `planning` tool. The plan's result reaches `planned` for the
    first time, and transition_notice appends "You have a plan now: carry it
    out step by step." to a result read by a model whose tool_choice is now
    narrowed to conclude.
    """
    from agentscope.tool import FunctionTool, Toolkit
    from hookkit import inventory_down
    from scripted import ALLOW

    from agentscope_harness import Harness

    async def make_plan(goal: str) -> str:
        """Make a plan.

        Args:
            goal (str): The goal.
        """
        return f"Plan for {goal}: 1. check stock 2. reserve 3. confirm"

    config = HarnessConfig(
        tools={"make_plan": ToolPolicy(role="planning"), "submit": ToolPolicy(role="finish")},
        max_enforce_retries=0,
    )
    ran = Ran()
    h = Harness(config, load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[
        FunctionTool(inventory_down, name="inventory", permission=ALLOW),
        FunctionTool(make_plan, permission=ALLOW),
        FunctionTool(shop_tools(ran)["submit"], permission=ALLOW),
    ]))
    script = [
        calls(("inventory", {"sku": "a"})),                                 # dependency down
        calls(("inventory", {"sku": "b"}), ("make_plan", {"goal": "restock"})),  # retried: constrain
        calls(("submit", {"answer": "inventory is down"})),
        text("done"),
    ]
    _, model, agent = harnessed(None, script, toolkit, harness=h)
    _, final, report = await drive(h, agent)
    assert any(d.hook == "tool_breaker_gate" and d.action == "constrain" for d in report.decisions)
    third = model.calls[2]
    assert getattr(third["tool_choice"], "mode", None) in ("submit", "none"), third["tool_choice"]
    plan_result = next(r for r in third.tool_results if "Plan for restock" in r)
    assert "carry it out step by step" not in plan_result, plan_result


async def test_the_drift_hint_is_not_given_in_consecutive_rounds():
    """README "The hooks" (after the table): "the same hint is never given twice
    in a row"; row 21: drift_detector "`stall_rounds` rounds without progress: a
    hint to change approach (given again for a stall after progress)".

    Attack: two ladder hints in the same post_reflect. After two empty
    selections phase_step hints "widen the search" every round (prio 40),
    after drift_detector's "change approach" (prio 20). Each overwrites the
    one remembered "last hint", so each round's drift hint is not "the last"
    and is given again: the model reads "The last N rounds brought nothing
    new. Change approach" in every round of the stall, with no progress in
    between.
    """
    ran = Ran()

    async def select(pick: str) -> str:
        """Select products from the candidates.

        Args:
            pick (str): What to pick.
        """
        ran.append(("select", {"pick": pick}))
        return ""

    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval"), "select": ToolPolicy(role="selection")},
        require_finish_tool=False, loop_threshold=20, loop_window=20,
    )
    script = [calls(("search", {"q": "mugs"}))] + [
        calls(("select", {"pick": f"mug {i}"})) for i in range(9)
    ] + [text("none fit")]
    h, model, agent = harnessed(config, script, [_catalogue(ran), select])
    _, final, report = await drive(h, agent)

    def given(call) -> int:
        return sum("Change approach" in t for t in hint_texts(call))

    counts = [given(c) for c in model.calls]
    new = [b - a for a, b in itertools.pairwise(counts)]
    widen = [sum("Widen the search" in t for t in hint_texts(c)) for c in model.calls]
    assert not any(x and y for x, y in itertools.pairwise(new)), f"drift hints per call {counts}, widen {widen}, {report.reason}"


def _search(ran: Ran):
    async def search(q: str) -> str:
        """Search the customer directory.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return f"1 match: contact jane.doe{len(ran)}@example.com about the order"

    return search


async def test_a_search_whose_every_result_is_withheld_is_stopped():
    """README row 20 (drift_result_tracker): "Progress is new information";
    "Also progress: a fact reached"; row 8: a result "the harness withheld,
    `injection_blocked` or `pii_blocked`, reaches none". Row 21: "`stall_rounds`
    rounds without progress: a hint ...; twice that: constrain (`stalled`)", and
    row 11: "A refusal met again (same gate or code) with nothing new in
    between ...: constrain".

    Attack: a `retrieval` tool whose every result is `pii_blocked` (its
    `pii` blocks e-mail addresses), called with a new query each round.
    `record_result_facts` marks the fact `retrieved` before the chain withholds
    the result; `unreach` takes the fact back but not the round's progress
    flag, so the next call reaches `retrieved` "for the first time" again.
    Every round counts as progress: the drift ladder never climbs, and the
    refusal ladder forgets each `pii_blocked` before it could meet it again.
    The run looped until AgentScope's own `max_iters` (nothing was read).
    What a result brings is now credited once the chain let the model read it.
    """
    ran = Ran()
    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", pii={"email": "block"})},
        stall_rounds=2, require_finish_tool=False,
    )

    h, model, agent = harnessed(config, _searching, [_search(ran)], max_iters=14)
    _, final, report = await drive(h, agent)
    told = [r for c in model.calls[-1:] for r in c.tool_results]
    assert all(r.startswith("[harness:pii_blocked]") for r in told), told[:2]
    # nothing new ever reached the model: the refusal met again constrains it at once
    assert len(ran) == 2, (len(ran), report.reason)
    assert [(d.hook, d.detail) for d in report.decisions if d.action == "constrain"] == [
        ("liveness_watchdog", "pii_blocked refused again")]
    assert "retrieved" not in report.facts


async def test_no_change_approach_reaches_a_model_narrowed_to_submit() -> None:
    """Round 166 a: an exploring hint given in a text round that terminal_enforcer then constrains.

README "The hooks" (after the table): "no hint invites exploring once the run is
constrained (one given in the round that then constrained it is dropped before the model
reads it; its `hint` decision stays in the report)". Row 23 terminal_enforcer: "Text answer
while a finishing tool is required: one more round with a nudge and `tool_choice` narrowed
to the finishing tool".

Attack: two rounds without news, then the model answers in text. At that post_reflect
drift_detector (priority 20) hints "Change approach" and terminal_enforcer (priority 60)
constrains the run (tool_choice narrowed to `submit`). Round 165 b drops an exploring hint
only from the deferred hints (a round that called tools); a text round's hints are added
at once (``_post_reflect``), so the model narrowed to `submit` reads "Change approach".
    """
    ran = Ran()

    async def submit(answer: str) -> str:
        """Deliver the answer.

        Args:
            answer (str): The answer.
        """
        return answer

    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")},
        stall_rounds=2, loop_threshold=20, loop_window=20,
    )
    script = [calls(("search", {"q": f"mugs {i}"})) for i in range(3)] + [
        text("We have red, blue and green mugs."),
        calls(("submit", {"answer": "red, blue and green mugs"})), text("done"),
    ]
    h, model, agent = harnessed(config, script, [_catalogue(ran), submit])
    _, final, report = await drive(h, agent)
    narrowed = [c for c in model.calls if getattr(c.tool_choice, "mode", None) == "submit"]
    assert narrowed, [c.tool_choice for c in model.calls]
    first = narrowed[0]
    i = model.calls.index(first)
    told_now = hint_texts(first)[len(hint_texts(model.calls[i - 1])):]
    assert any("call submit" in t for t in told_now), told_now  # the constrain rung's nudge
    # the break: the model narrowed to submit is told to change approach (explore) beside it
    assert not any("Change approach" in t or "going round in circles" in t for t in told_now), told_now


@harness_hook("post_tool_call", priority=60, name="no_customer_data", kind="safety")
def no_customer_data(ctx) -> None:
    if ctx.tool.name == "search" and "contact" in ctx.result.text:
        raise HookRejectSignal("That result holds customer data and was withheld.", code="customer_data")


async def test_a_search_whose_every_result_a_users_hook_withholds_is_stopped():
    """Round 166 a: a result a user's hook withholds after drift_result_tracker still counts as progress.

README row 20 (drift_result_tracker): "Also progress: ... (each by a result the model
read: one the harness withheld ... brings no fact, candidates or picks, and is no
progress)"; row 11/21: a refusal met again with nothing new between -> constrain;
`stall_rounds` rounds without progress -> hint, then constrain. "Writing a hook": a
post_tool_call hook may raise `HookRejectSignal` (the result is withheld) at any priority.

Attack (round 165 b's loop, through a user's hook): a compliance hook (safety,
post_tool_call, priority 60) withholds every `search` result that names a customer.
drift_result_tracker (priority 50) has already judged the text new and set the round's
progress flag; the withholding afterwards does not take it back (``credit`` covers facts
and counts only). Each round reads as progress: the drift ladder never climbs and the
refusal ladder forgets each `customer_data` refusal before meeting it again. The model,
which read nothing, loops to AgentScope's `max_iters` (14 calls). Harness-withheld
(`pii_blocked`, round 165 b) stops after 2.
    """
    ran = Ran()
    config = HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, stall_rounds=2,
                           require_finish_tool=False)

    h, model, agent = harnessed(config, _searching, [_search(ran)], hooks=(no_customer_data,), max_iters=14)
    _, final, report = await drive(h, agent)
    told = [r for c in model.calls[-1:] for r in c.tool_results]
    assert told and all("customer_data" in r for r in told), told[:2]  # nothing was ever read
    constrained = [(d.hook, d.detail) for d in report.decisions if d.action == "constrain"]
    # the break: every round counted as progress; no ladder climbed; max_iters ended it
    assert constrained, (len(ran), report.terminal_state.value, report.reason)
    assert len(ran) <= 4, (len(ran), report.reason)

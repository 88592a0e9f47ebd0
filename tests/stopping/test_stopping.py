"""Stopping power, end to end on a real Agent: models stuck in the ways real
models get stuck are stopped in a few model calls, honestly (``incomplete``,
with a reason naming the pattern), and a productive run is never stopped.

"Obedient" models follow ``tool_choice`` as a compliant provider does;
"stubborn" ones play their script whatever they are told."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from itertools import count, pairwise
from typing import Any

from hookkit import Ran, drive, harnessed, hint_texts, shop_tools
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import calls, text

from agentscope_harness import HarnessConfig, Ledger, Principal, ToolPolicy
from agentscope_harness.context import reason_words
from agentscope_harness.facts import Novelty, _without
from agentscope_harness.registry import harness_hook

U1 = Principal(user_id="u-1", tenant="acme")
FORCED = "Here is the best answer I can give from what I found."
CATALOGUE = "red kettle 1.7 l 39 EUR, steel kettle 1.5 l 45 EUR, glass kettle 1.2 l 52 EUR, " * 3
CHANGE = "Change approach"
CIRCLES = "going round in circles"
CONCLUDE = "Conclude now"


def library(ran: Ran, fresh: bool) -> list[Any]:
    """search and fetch: with ``fresh`` every result is new content, else
    every result is the same catalogue (with the query said back)."""

    def body(key: str) -> str:
        n = len(ran)
        return " ".join(f"item{n}x{j}" for j in range(30)) if fresh else f"{key}: {CATALOGUE}"

    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return body(f"Results for {q}")

    async def fetch(url: str) -> str:
        """Fetch a page found by search.

        Args:
            url (str): The page.
        """
        ran.append(("fetch", {"url": url}))
        return body(f"Page {url}")

    return [search, fetch]


def policy(cap: int = 10_000, **kw: Any) -> HarnessConfig:
    submit = kw.pop("submit", ToolPolicy(role="finish"))
    return HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
            "fetch": ToolPolicy(role="retrieval"),
            "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
            "submit": submit,
        },
        ledgers={"retrieval": Ledger(cap=cap)},
        **kw,
    )


def agent_for(config: HarnessConfig, ran: Ran, steps: list[Callable[[int], Any]], *,
              obedient: bool, fresh: bool = False, hooks: tuple = ()):
    """A harnessed agent whose model plays ``steps`` in turn, forever."""
    n = count(1)
    shop = shop_tools(ran)

    def play(turn) -> Any:
        mode = getattr(turn.tool_choice, "mode", None)
        if obedient and mode == "none":
            return text(FORCED)
        if obedient and mode not in (None, "auto", "required"):
            return calls((mode, {"answer": FORCED}))
        i = next(n)
        return steps[(i - 1) % len(steps)](i)

    return harnessed(
        config, [play], [*library(ran, fresh), shop["lookup_order"], shop["submit"]], repeat=True,
        hooks=hooks,
    )


def search(i: int) -> Any:
    return calls(("search", {"q": f"kettle {i}"}))


def fetch(i: int) -> Any:
    return calls(("fetch", {"url": f"https://shop.example/p/{i}"}))


def denied(i: int) -> Any:
    return calls(("lookup_order", {"order_id": f"A-{i}", "user_id": "u-2"}))


def modes(model) -> list[str | None]:
    return [c["tool_choice"].mode if c["tool_choice"] is not None else None for c in model.calls]


def all_hints(model) -> list[str]:
    """Every hint the model was given, in order (the last payload has them all)."""
    return hint_texts(model.calls[-1])


def assert_ladder_climbs(model) -> None:
    """Never the same hint twice in a row; once told to conclude, never
    invited to explore again."""
    hints = all_hints(model)
    assert all(a != b for a, b in pairwise(hints)), hints
    concluded = [i for i, h in enumerate(hints) if CONCLUDE in h or "refused again" in h]
    if concluded:
        later = hints[concluded[0]:]
        assert not any(CHANGE in h or CIRCLES in h for h in later), later


# ------------------------------------------------------------ ignored refusals


@settings(max_examples=6, deadline=None)
@given(n=st.integers(min_value=1, max_value=8), obedient=st.booleans())
def test_a_spent_ledger_stops_within_n_plus_3_model_calls(n, obedient):
    async def go():
        ran = Ran()
        h, model, agent = agent_for(policy(cap=n), ran, [search], obedient=obedient, fresh=True)
        _, final, report = await drive(h, agent, U1)
        return ran, model, final, report

    ran, model, final, report = asyncio.run(go())
    assert len(model.calls) <= n + 3
    assert len(ran.of("search")) == n  # the refused searches never ran
    assert report.refusals["quota_exhausted"] == 2
    assert modes(model)[n + 2] == "submit"  # constrained right after the second refusal
    if obedient:  # it concluded with what it had, as it was told to
        assert ran.of("submit") == [{"answer": FORCED}]
        assert final.get_text_content() == FORCED
        assert report.terminal_state.value == "completed"
    else:
        assert ran.of("submit") == []
        assert "a step it needed was refused" in final.get_text_content()
        assert report.terminal_state.value == "incomplete"
        assert report.reason == "refused:quota_exhausted"
    assert_ladder_climbs(model)


async def test_an_ignored_permission_denied_stops_within_4_model_calls():
    ready, waiting = ToolPolicy(role="finish"), ToolPolicy(role="finish", requires_facts=["retrieved"])
    for submit in (ready, waiting):
        for obedient in (True, False):
            ran = Ran()
            h, model, agent = agent_for(policy(submit=submit), ran, [denied], obedient=obedient)
            _, final, report = await drive(h, agent, U1)
            assert len(model.calls) <= 4, (submit, obedient)
            assert ran.of("lookup_order") == []
            assert modes(model)[2] == "submit"
            if obedient and submit is ready:  # it told the user, with the finishing tool
                assert report.terminal_state.value == "completed"
                assert final.get_text_content() == FORCED
            else:  # ignored it, or could not conclude (the finishing tool waits for facts)
                assert report.terminal_state.value == "incomplete"
                assert report.reason == "refused:permission_denied"
            assert "[harness:" not in final.get_text_content()
            assert any("refused again (permission_denied)" in h_ for h_ in hint_texts(model.calls[2]))
            assert_ladder_climbs(model)


async def test_a_refusal_met_once_between_productive_rounds_does_not_escalate():
    # a permission_denied is forgotten after stall_rounds (3) productive rounds
    # without one (one between two such attempts is not enough: round 59)
    ran = Ran()
    steps = [denied, search, search, search, denied, search, lambda i: calls(("submit", {"answer": "two kettles"}))]
    h, model, agent = agent_for(policy(), ran, steps, obedient=True, fresh=True)
    _, final, report = await drive(h, agent, U1)
    assert modes(model) == [None] * 7
    assert report.refusals == {"permission_denied": 2}
    assert report.terminal_state.value == "completed"
    assert final.get_text_content() == "two kettles"


async def test_an_efficiency_refusal_that_latches_open_does_not_escalate():
    ran = Ran()
    same = [lambda i: calls(("search", {"q": "kettle"}))] * 4 + [lambda i: text("A red kettle.")]
    h, model, agent = agent_for(
        policy(escape_after_rejects=2, loop_window=10, loop_threshold=10, require_finish_tool=False),
        ran, same, obedient=True,
    )
    _, _, report = await drive(h, agent, U1)
    assert report.refusals == {"duplicate_call": 2}
    assert len(ran.of("search")) == 2  # the third repeat escaped the latch and ran
    assert modes(model) == [None] * 5
    assert not any(d.action in ("constrain", "stop") for d in report.decisions)
    assert report.terminal_state.value == "completed"


async def test_a_finishing_tool_refused_early_does_not_escalate():
    ran = Ran()
    submit = ToolPolicy(role="finish", requires_facts=["retrieved"])
    steps = [lambda i: calls(("submit", {"answer": "?"}))] * 2 + [search] + [
        lambda i: calls(("submit", {"answer": "a red kettle"})),
    ]
    h, model, agent = agent_for(policy(submit=submit), ran, steps, obedient=True, fresh=True)
    _, final, report = await drive(h, agent, U1)
    assert modes(model) == [None] * 4
    assert report.refusals == {"not_ready": 2}
    assert report.terminal_state.value == "completed"
    assert final.get_text_content() == "a red kettle"


# ---------------------------------------------------------------- wandering


async def test_a_two_tool_wander_is_stopped_within_16_model_calls():
    for obedient in (True, False):
        ran = Ran()
        h, model, agent = agent_for(policy(), ran, [search, fetch], obedient=obedient)
        _, final, report = await drive(h, agent, U1)
        assert len(model.calls) <= 16
        assert report.terminal_state.value == "incomplete"
        assert report.reason == "cycling"
        hints = all_hints(model)
        assert sum(CIRCLES in h_ for h_ in hints) == 1  # a hint, then the constraint
        assert "submit" in modes(model)
        assert "[harness:" not in final.get_text_content()
        assert_ladder_climbs(model)


async def test_a_three_tool_cycle_is_stopped():
    ran = Ran()
    own_order = lambda i: calls(("lookup_order", {"order_id": f"A-{i}", "user_id": "u-1"}))  # noqa: E731
    h, model, agent = agent_for(policy(), ran, [search, fetch, own_order], obedient=False)
    _, _, report = await drive(h, agent, U1)
    assert len(model.calls) <= 16
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "cycling"
    assert sum(CIRCLES in h_ for h_ in all_hints(model)) == 1
    assert "search, fetch, lookup_order" in all_hints(model)[-2] + all_hints(model)[-1]
    assert_ladder_climbs(model)


STALLED = HarnessConfig().fallback_text.format(reason=reason_words("stalled"))


async def test_same_tool_new_queries_nothing_new_is_stopped():
    ran = Ran()
    h, model, agent = agent_for(policy(), ran, [search], obedient=True)
    _, final, report = await drive(h, agent, U1)
    assert len(model.calls) <= 10
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "stalled"
    assert_ladder_climbs(model)
    # what the user receives says so too (red team: the forced answer arrived as if complete)
    assert (final.get_text_content() or "").startswith(STALLED)
    assert "What I found before stopping:" in (final.get_text_content() or "")


async def test_a_stalled_run_without_a_finishing_tool_tells_the_user_it_is_incomplete():
    """Made to conclude for lack of progress, the obedient model answers in
    text: the report says ``incomplete``/``stalled`` and so does the answer
    (the fallback with what was found), the model's text followed in the
    stream by it."""
    ran = Ran()
    h, model, agent = agent_for(policy(submit=ToolPolicy()), ran, [search], obedient=True)
    events, final, report = await drive(h, agent, U1)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "stalled")
    assert modes(model)[-1] == "none"
    text_out = final.get_text_content() or ""
    assert text_out.startswith(STALLED) and FORCED not in text_out
    streamed = "".join(getattr(e, "delta", "") or "" for e in events if type(e).__name__ == "TextBlockDeltaEvent")
    assert streamed.endswith(text_out)


# --------------------------------------------------------------- productive


async def test_thirty_productive_rounds_then_finish_complete():
    for steps in ([search], [search, fetch]):
        ran = Ran()

        def step(i: int, script=tuple(steps)) -> Any:
            if i > 30:
                return calls(("submit", {"answer": "the best kettle"}))
            return script[(i - 1) % len(script)](i)

        h, model, agent = agent_for(policy(), ran, [step], obedient=True, fresh=True)
        _, final, report = await drive(h, agent, U1)
        assert len(model.calls) == 31
        assert modes(model) == [None] * 31
        assert not any(
            d.hook == "drift_detector" or d.action in ("constrain", "stop") for d in report.decisions
        )
        assert not any(CHANGE in h_ or CIRCLES in h_ for h_ in all_hints(model))
        assert report.terminal_state.value == "completed"
        assert final.get_text_content() == "the best kettle"


# ------------------------------------------------------------------ ladder


@harness_hook("pre_think", priority=30, name="told_to_conclude", kind="observer")
def told_to_conclude(ctx) -> None:
    if ctx.facts.rounds >= 1:
        ctx.facts.force_conclude = True  # no forced_at: the enforcer never stops it


async def test_after_a_constrain_no_hint_invites_exploring():
    ran = Ran()
    steps = [search, fetch] * 5 + [lambda i: text("A red kettle.")]
    h, model, agent = agent_for(
        policy(stall_rounds=1), ran, steps, obedient=False, hooks=(told_to_conclude,),
    )
    # constrained from the second call on (without the enforcer's stop: the
    # test hook sets no start); stale rounds follow, and no hint ever says
    # to change approach or go round again
    _, _, report = await drive(h, agent, U1)
    assert modes(model)[1:] == ["submit"] * (len(model.calls) - 1)
    assert not any(CHANGE in h_ or CIRCLES in h_ for h_ in all_hints(model))
    assert not any(d.hook == "drift_detector" and d.action == "hint" for d in report.decisions)


async def test_the_enforcer_round_narrows_tool_choice_and_an_obedient_model_completes():
    ran = Ran()
    steps = [search, lambda i: text("A red kettle.")]
    h, model, agent = agent_for(policy(), ran, steps, obedient=True, fresh=True)
    _, final, report = await drive(h, agent, U1)
    assert modes(model) == [None, None, "submit"]
    assert "call submit to deliver the result" in hint_texts(model.calls[2])[-1]
    assert report.terminal_state.value == "completed"
    assert final.get_text_content() == FORCED


# ------------------------------------------------------------------ novelty


def test_novelty_discounts_the_echo_of_the_arguments():
    seen = Novelty()
    assert seen.add("No results for 'kettle 1'", echo={"q": "kettle 1"})
    assert not seen.add("No results for 'kettle 2'", echo={"q": "kettle 2"})
    assert not seen.add("No results for 'Kettle-3'", echo={"q": "kettle 3"})
    assert seen.add("Two results for kettle 4: red, steel", echo={"q": "kettle 4"})


def test_novelty_a_small_change_in_a_long_result_is_not_new():
    seen = Novelty()
    page = " ".join(f"word{i}" for i in range(200))
    assert seen.add(page)
    assert not seen.add(page)
    assert not seen.add(page.replace("word100", "changed"))
    assert seen.add(page + " " + " ".join(f"more{i}" for i in range(60)))


def _without_reference(words: list[str], phrases: list[tuple[str, ...]]) -> list[str]:
    """Every position tried: each occurrence of each phrase (overlapping too) removed."""
    keep = [True] * len(words)
    for phrase in phrases:
        for i in range(len(words)):
            if tuple(words[i:i + len(phrase)]) == phrase:
                keep[i:i + len(phrase)] = [False] * len(phrase)
    return [w for w, k in zip(words, keep, strict=True) if k]


_FEW_WORDS = st.sampled_from(["a", "b", "kettle", "1"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_FEW_WORDS, max_size=30), st.lists(st.lists(_FEW_WORDS, min_size=1, max_size=4).map(tuple), max_size=3))
def test_an_echo_is_removed_wherever_it_occurs(words: list[str], phrases: list[tuple[str, ...]]):
    """The echo of a call's arguments is found by its first word's
    occurrences (``list.index``): the same words removed as trying every
    position, overlapping and repeated occurrences included."""
    assert _without(words, phrases) == _without_reference(words, phrases)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=200), max_size=60), st.integers(min_value=2, max_value=50))
def test_novelty_memory_is_bounded(texts, cap):
    seen = Novelty(cap=cap)
    for t in texts:
        seen.add(t)
        assert len(seen) <= cap

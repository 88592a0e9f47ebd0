"""Round 177 a (a red team on that round's turns): `post_tool_call` hooks on a result over
TURN_OVER (8,192 chars) give the loop a turn between them; parallel calls' chains interleave
there. Two identical 10 KB results fetched in parallel were both news (the second was judged
before the first was remembered: the drift tracker judges at priority 50, the result is
remembered when its hooks are done), so a model re-reading the page ran 6 model calls where a
230-character page ran 3. A judgement made before another result was remembered is made
again, with no await before it is remembered (`Heard.at`, `Novelty.kept`).

README "Hooks": "other tasks (a parallel call's hooks) may run between two of them ... between
`post_tool_call` hooks on a result over 8,192 characters once they held the event loop a
millisecond". README hook 20: "nor is one repeated word for word, however large". The run's
outcome must not depend on whether results were long: each scenario runs once with short results
and once with long ones (under the default 16 KB `result_max_tokens`, so nothing is truncated),
turns forced at every hook (SLICE_S = 0: a loaded machine), and compares what the model was told
(results' bodies stripped) and the report's terminal state, reason and decisions."""
from __future__ import annotations

import re

import pytest

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy, redaction
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

BODY: dict[str, str] = {}


def page(tag: str, long: bool) -> str:
    line = f"Record {tag}: the parcel left the depot and is on its way to the customer.\n"
    return line * (130 if long else 3)  # ~10 KB or ~230 chars


async def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): Which.
    """
    return BODY[url]


async def submit(answer: str) -> str:
    """Submit the final answer.

    Args:
        answer (str): The answer.
    """
    return BODY.get("submit:" + answer, "submitted: " + answer)


def _strip(msg: str) -> str:
    msg = re.sub(r"(Record \w+: the parcel[^\n]*\n?)+", "<body>", msg)
    msg = re.sub(r"(submitted: \w+ ?)+", "<sub>", msg)
    return re.sub(r"[0-9a-f]{8,}", "<hex>", msg)


async def _play(script, bodies, config, long: bool, monkeypatch, force: bool = True):
    if force:
        monkeypatch.setattr(redaction, "SLICE_S", 0.0)
    BODY.clear()
    BODY.update({k: v(long) if callable(v) else page(v, long) if not v.startswith("=") else v[1:]
                 for k, v in bodies.items()})
    h = Harness(config, load_entry_points=False, environ={})
    model = ScriptedModel(list(script))
    agent = make_agent(model, [fetch, submit], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "where is my parcel?")
    rep = h.last_report(agent)
    told = [[_strip(m) for m in tool_messages(c)] for c in model.calls]
    hints = [_strip(str([m for m in c["formatted"] if m["role"] != "tool"][-1])) for c in model.calls]
    decisions = [(d.hook, d.action, getattr(d, "code", None)) for d in rep.decisions] if hasattr(rep, "decisions") else []
    return dict(calls=len(model.calls), told=told, hints=hints, state=str(rep.terminal_state),
                reason=str(rep.reason), answer=_strip(final.get_text_content() or ""), decisions=decisions)


async def _compare(script, bodies, config, monkeypatch, force: bool = True):
    short = await _play(script, bodies, config, False, monkeypatch, force)
    long_ = await _play(script, bodies, config, True, monkeypatch, force)
    for key in short:
        assert long_[key] == short[key], (key, short[key], long_[key])
    return short


@pytest.mark.parametrize("force", [False, True], ids=["own_timing", "turn_at_every_hook"])
async def test_identical_long_results_in_parallel_then_the_same_call_again(monkeypatch, force: bool) -> None:
    """Two fetches in one round return the same page word for word; the model then calls the
    second again and again (nothing new). loop_threshold 2: the loop detector constrains a
    call whose last result was not news."""
    script = [calls(("fetch", {"url": "a"}), ("fetch", {"url": "b"}))] + [
        calls(("fetch", {"url": "b"})) for _ in range(8)] + [text("It is on its way.")] * 3
    cfg = HarnessConfig(loop_threshold=2, loop_window=6)
    short = await _compare(script, {"a": "same", "b": "same"}, cfg, monkeypatch, force=force)
    assert short["calls"] == 3 and "stalled" in short["reason"], short


async def test_identical_long_results_in_parallel_default_config(monkeypatch) -> None:
    """The same with the default config and the machine's own timing (no forcing): the run
    that repeats a result already read word for word is stopped after as many model calls
    whether the page is 230 characters or 10 KB."""
    script = [calls(("fetch", {"url": "a"}), ("fetch", {"url": "b"}))] + [
        calls(("fetch", {"url": "b"})) for _ in range(14)] + [text("It is on its way.")] * 3
    await _compare(script, {"a": "same", "b": "same"}, HarnessConfig(), monkeypatch, force=False)


async def test_finish_beside_a_lookup_in_one_round(monkeypatch) -> None:
    """A finishing tool and a lookup in one round, both long; then text."""
    script = [calls(("fetch", {"url": "a"}), ("submit", {"answer": "done"}), ("fetch", {"url": "b"})),
              text("done"), text("done")]
    cfg = HarnessConfig(tools={"submit": ToolPolicy(role="finish"), "fetch": ToolPolicy(role="lookup")})
    await _compare(script, {"a": "a", "b": "b", "submit:done": "sub"}, cfg, monkeypatch)


async def test_two_finishes_in_one_round(monkeypatch) -> None:
    """Two finishing calls in one round (the model hedges): the same answer recorded either way."""
    script = [calls(("submit", {"answer": "first"}), ("submit", {"answer": "second"})), text("x"), text("x")]
    cfg = HarnessConfig(tools={"submit": ToolPolicy(role="finish")})
    await _compare(script, {"submit:first": "one", "submit:second": "two"}, cfg, monkeypatch)


async def test_ledger_nudges_with_parallel_long_results(monkeypatch) -> None:
    """A retrieval ledger (cap 4, soft_at 2) spent by three parallel fetches a round."""
    script = [calls(*(("fetch", {"url": u}) for u in "abc")), calls(*(("fetch", {"url": u}) for u in "def")),
              text("ok"), text("ok")]
    cfg = HarnessConfig(ledgers={"retrieval": Ledger(4, 2)},
                        tools={"fetch": ToolPolicy(role="lookup", ledgers=["retrieval"])})
    await _compare(script, {u: u for u in "abcdef"}, cfg, monkeypatch)


async def test_pii_block_beside_a_finish(monkeypatch) -> None:
    """A lookup whose result carries a blocked card, beside a finishing call, one round."""
    card = " card 4111 1111 1111 1111 on file.\n"
    script = [calls(("fetch", {"url": "a"}), ("submit", {"answer": "done"})), text("done"), text("done")]
    cfg = HarnessConfig(tools={"submit": ToolPolicy(role="finish"),
                               "fetch": ToolPolicy(role="lookup", pii={"card": "block"})})
    await _compare(script, {"a": lambda long: page("a", long) + card, "submit:done": "s"}, cfg, monkeypatch)


@pytest.mark.parametrize("force", [False, True], ids=["own_timing", "turn_at_every_hook"])
async def test_two_retrieval_results_in_parallel_are_told_the_next_step(monkeypatch, force: bool) -> None:
    """Both results of two parallel fetches reach `retrieved` before either is read: with long
    pages (the hooks giving turns) each may be told "You have results now", as either may yet
    be withheld (round 177 c: telling one only left a withheld one's twin untold); each is
    told at most once, and the model always learns it."""
    script = [calls(("fetch", {"url": "a"}), ("fetch", {"url": "b"})), text("It is on its way."), text("x")]
    cfg = HarnessConfig(tools={"fetch": ToolPolicy(role="retrieval")})
    for long in (False, True):
        played = await _play(script, {"a": "a1", "b": "b2"}, cfg, long, monkeypatch, force)
        told = [m.count("You have results now") for m in played["told"][-1]]
        assert sum(told) >= 1 and max(told) == 1, played["told"]

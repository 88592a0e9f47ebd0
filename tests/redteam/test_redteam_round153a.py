"""Round 153 a (a red team on round 152's fixes; about 12 attacks held).

1. A grader middleware's own model call with no price under a `CostPolicy` without a cap
   was counted in `model_calls`, charged $0 and said nowhere (round 152 d said it only
   for the agent's own calls): `ModelGuard.guarded_call` says it too.
2. A `fallback_text` (or `model_error_text`, or `CostPolicy.fallback_text`) of
   zero-width or other invisible characters passed round 152 d's `strip()`: refused as
   an answer that shows nothing is judged (`injection.shows_nothing`).
3. An `ask_when` or `ctx.ask` reason of blanks or zero-width characters parked the call
   with a question that showed nothing: it says which rule or hook asks.
4. `SQLiteStore("file:...?nolock=1")` (or `vfs=unix-none`) shared its file, passing round
   152 b's check, and turned off SQLite's locking: 400 concurrent leases under
   `max_in_flight=20` granted up to 82. A URI with parameters is refused.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    SQLiteStore,
    TerminalState,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.injection import shows_nothing
from tests.redteam.test_redteam_round151a_grader_after_end import GradeTheAnswer
from tests.scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, search, text

INVISIBLE = ["\u200b", "\u2060\u200b", "\u3164", "\u2800"]


@pytest.mark.asyncio
async def test_a_graders_unpriced_model_is_said_in_the_report() -> None:
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}), inp=100_000, out=10)],
                          model="judge")
    model = ScriptedModel([text("The answer is 42.", inp=1000, out=10)], model="m")
    h = Harness(HarnessConfig(cost=CostPolicy(prices={"m": (1.0, 1.0)})), load_entry_points=False, environ={})
    agent = make_agent(model, [search], [GradeTheAnswer(judge), *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert len(judge.calls) == 1 and report.model_calls == 2
    told = [d.detail for d in report.decisions if d.action == "unpriced_model"]
    assert told == ["model 'judge' has no price; its calls are not counted in spent_usd"]


@pytest.mark.parametrize("value", INVISIBLE)
@pytest.mark.parametrize("field", ["fallback_text", "model_error_text"])
def test_an_invisible_answer_text_is_refused(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{field}[\\s\\S]*blank text"):
        HarnessConfig(**{field: value})
    with pytest.raises(ValueError, match="fallback_text[\\s\\S]*blank text"):
        CostPolicy(fallback_text=value)


@harness_hook("pre_tool_call", priority=25, name="blank_asker", kind="observer")
def blank_asker(ctx: HookContext) -> None:
    if ctx.tool.name == "search":
        ctx.ask(ctx.tool.args["q"])


@pytest.mark.asyncio
@pytest.mark.parametrize("blank", [" ", "\u200b", "\n\t"])
@pytest.mark.parametrize("asker", ["ask_when", "hook"])
async def test_a_blank_reason_still_says_who_asks(asker: str, blank: str) -> None:
    RAN.clear()
    if asker == "ask_when":
        h = Harness(HarnessConfig(tools={"search": ToolPolicy(ask_when=lambda a: a["q"])}),
                    load_entry_points=False, environ={})
    else:
        h = Harness(HarnessConfig(), hooks=[blank_asker], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": blank})), text("done")]), [search], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, "go")
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.WAITING_INPUT and RAN == []
    assert report.reason == ("the approval rule of search asks a human" if asker == "ask_when"
                             else "blank_asker asks a human to confirm this call")
    assert not shows_nothing(report.reason)


@pytest.mark.parametrize("query", ["nolock=1", "vfs=unix-none", "immutable=1", "mode=ro"])
def test_an_sqlite_uri_with_parameters_is_refused(tmp_path: Path, query: str) -> None:
    with pytest.raises(ValueError, match="without URI parameters"):
        SQLiteStore(f"file:{tmp_path / 'fleet.db'}?{query}")

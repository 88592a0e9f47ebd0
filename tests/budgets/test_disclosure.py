"""The budget status line the model sees: when it changes meaningfully
(tier, ledger soft limit, wrap-up window), on every call, or never; written
before the call, so each payload only extends the previous one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from scripted import ScriptedModel, Turn, calls, make_agent, payload_bytes, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Ledger, TerminalState, ToolPolicy

STATUS = re.compile(r"\[harness:budget\][^<]*")


def status_lines(turn: Turn) -> list[str]:
    """The status lines in one payload, in order."""
    return STATUS.findall(payload_bytes(turn))


def ledger_config(**kw: Any) -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=8, soft_at=3)},
        **kw,
    )


def searches(n: int) -> list[Any]:
    return [calls(("search", {"q": f"q{i}"})) for i in range(n)]


async def test_changes_the_status_line_comes_at_the_soft_limit_only():
    h = Harness(ledger_config(max_model_calls=20), load_entry_points=False)
    model = ScriptedModel([*searches(5), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    per_call = [status_lines(t) for t in model.calls]
    # 3 searches reach the soft limit: the 4th call is the first to be told
    assert per_call[:4] == [[], [], [], ["[harness:budget] 17 model calls left · retrieval 5/8 left"]]
    # and it is not repeated while nothing meaningful changes
    assert per_call[4] == per_call[5] == per_call[3]


async def test_every_call_discloses_before_each_call_and_payloads_stay_prefixes():
    h = Harness(ledger_config(max_model_calls=20, disclose_budget="every_call"), load_entry_points=False)
    model = ScriptedModel([*searches(2), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    assert [status_lines(t)[-1] for t in model.calls] == [
        "[harness:budget] 20 model calls left · retrieval 8/8 left",
        "[harness:budget] 19 model calls left · retrieval 7/8 left",
        "[harness:budget] 18 model calls left · retrieval 6/8 left",
    ]
    for before, after in zip(model.calls, model.calls[1:], strict=False):
        old, new = payload_bytes(before), payload_bytes(after)
        assert new[: len(old) - 2] == old[:-2]  # the JSON list only grows at its end
    assert h.last_report(agent).prefix_breaks == 0


async def test_off_never_discloses():
    h = Harness(ledger_config(max_model_calls=20, disclose_budget="off"), load_entry_points=False)
    model = ScriptedModel([*searches(5), text("done")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    assert not any(status_lines(t) for t in model.calls)


async def test_a_tier_change_is_disclosed_with_money_left():
    lite = ScriptedModel([text("done")], model="lite")
    h = Harness(HarnessConfig(cost=CostPolicy(
        cap_usd=0.5, prices={"scripted": (1000.0, 0.0), "lite": (1.0, 1.0)}, tier_models={"lite": lite},
    )), load_entry_points=False)
    # 300 input tokens at $1000/M: $0.30 of $0.50 spent after the 1st call
    model = ScriptedModel([calls(("search", {"q": "a"}), inp=300, out=0)])
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    assert status_lines(lite.calls[0]) == ["[harness:budget] $0.20 of $0.50 left · now on the lite model"]
    assert final.get_text_content() == "done"


async def test_the_wrap_up_window_is_disclosed():
    h = Harness(HarnessConfig(deadline_s=60, wrap_up_s=60), load_entry_points=False)
    model = ScriptedModel([text("done")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    [line] = status_lines(model.calls[0])
    assert re.fullmatch(r"\[harness:budget\] (59|60)s left", line)


async def test_a_status_line_quoted_in_the_answer_never_reaches_the_user():
    def parrot(turn: Turn) -> Any:
        lines = status_lines(turn)
        return text(f"Done. {lines[-1]}" if lines else "no line")

    h = Harness(ledger_config(disclose_budget="every_call"), load_entry_points=False)
    agent = make_agent(ScriptedModel(parrot), [search], h.middlewares())
    _, final = await run(agent)
    assert "harness:budget" not in (final.get_text_content() or "")


# ------------------------------------------- wraps up on the status line alone


def status_reader(turn: Turn) -> Any:
    """A model that keeps searching until a status line says the budget is
    low (a retrieval ledger at its soft limit, or a cheaper tier), then
    delivers. It ignores every other hint."""
    lines = status_lines(turn)
    if lines:
        return calls(("submit", {"answer": "the best kettle"}))
    return calls(("search", {"q": f"q{turn.rounds}"}))


async def submit(answer: str) -> str:
    """Deliver the answer.

    Args:
        answer (str): The answer.
    """
    return "delivered"


@pytest.mark.parametrize("disclose", ["changes", "off"])
async def test_a_model_reading_the_status_line_wastes_fewer_calls(disclose: str):
    h = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
               "submit": ToolPolicy(role="finish")},
        ledgers={"retrieval": Ledger(cap=4, soft_at=3)},
        max_model_calls=10,
        disclose_budget=disclose,  # type: ignore[arg-type]
    ), load_entry_points=False)
    model = ScriptedModel(status_reader)
    agent = make_agent(model, [search, submit], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    if disclose == "changes":
        # told at the soft limit (3 searches): delivers at the next call
        assert report.model_calls == 4 and report.refusals == {}
        assert report.terminal_state == TerminalState.COMPLETED
    else:
        # hints alone: refused searches until the ignored refusal stops the run
        assert report.model_calls == 7 and report.refusals["quota_exhausted"] >= 2
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:quota_exhausted")

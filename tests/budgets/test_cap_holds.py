"""The run's caps hold before each model call, not only on the ladder: a call
whose estimated cost would take the run past ``cap_usd`` (plus approved
extensions), ``max_input_tokens`` or ``max_output_tokens`` is not made. The
run then ends as at the ladder's last rung: the fallback answer, or with
``on_exhausted="ask"`` the budget question.

Estimates: this request's input at characters / 4; its output at the model's
``max_tokens`` when set, else the largest output of one call the run has seen."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import UserMsg
from pydantic import BaseModel
from scripted import RAN, ScriptedModel, calls, fetching, make_agent, run, search, text
from server import SUMMARY, FakeOpenAI, Reply, _page

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, TerminalState

FALLBACK = "Out of budget: here is where things stand."
BIG = {"big": (10.0, 30.0)}
"""USD per M tokens: a call of 1000 input and 1000 output tokens costs $0.04."""


def searching(inp: int = 1000, out: int = 1000) -> Any:
    """A model step that always searches something new, at the given usage."""
    return lambda turn: calls(("search", {"q": f"q{len(RAN)}"}), inp=inp, out=out)


def overspend_stops(report: Any) -> list[str]:
    return [d.detail for d in report.decisions if d.point == "on_model_call" and d.action == "fallback"]


async def test_a_call_that_would_take_the_spend_past_the_cap_is_not_made():
    """Red team: with no ``minimal`` tier the full model was called at 20 %
    left, with no check of that call's cost: $0.12 of $0.10."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices=BIG, fallback_text=FALLBACK)),
                load_entry_points=False)
    model = ScriptedModel(searching(), model="big")
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    # $0.08 spent; a third call (its output alone estimated $0.03, the largest seen) would pass $0.10
    assert len(model.calls) == 2 and report.model_calls == 2
    assert report.spent_usd == pytest.approx(0.08) and report.spent_usd <= 0.10
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert final.get_text_content().startswith(FALLBACK)
    assert "What I found before stopping:" in final.get_text_content()
    [stop] = overspend_stops(report)
    assert "would take the spend past the cap" in stop and "$0.0200 left" in stop


class Bounded(ScriptedModel):
    """A scripted model whose calls declare an output bound."""

    class Parameters(BaseModel):
        max_tokens: int = 2000


async def test_the_models_max_tokens_bounds_the_output_estimate():
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices=BIG, fallback_text=FALLBACK)),
                load_entry_points=False)
    model = Bounded(searching(), model="big")
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    # up to 2000 output tokens ($0.06) fits the first call; after it ($0.04) it no longer does
    assert len(model.calls) == 1
    assert report.spent_usd == pytest.approx(0.04)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


async def test_with_ask_the_call_that_would_overspend_asks_and_an_extension_continues():
    """Red team: "This task has used its budget ($0.1200 of $0.1000)"."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices=BIG, on_exhausted="ask")),
                load_entry_points=False)
    model = ScriptedModel(searching(), model="big")
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 2
    assert report.terminal_state == TerminalState.WAITING_INPUT
    assert [d.action for d in report.decisions if d.hook == "budget_router"][-1:] == ["ask"]
    # $0.02 is left, too little for the next call: said so, not "used" (round 101)
    assert final.get_text_content().startswith(
        "This task's next step would go past its budget ($0.0800 of $0.1000 spent).")

    h.extend(agent, 0.05)
    model.script = lambda turn: text("done", inp=1000, out=100)
    _, final = await run(agent, "go on")
    report = h.last_report(agent)
    assert final.get_text_content() == "done" and len(model.calls) == 3
    assert report.extensions == [{"what": "usd", "by": 0.05, "approved_by": None}]


async def test_a_call_that_would_pass_the_input_token_cap_is_not_made():
    fetch = fetching("lorem ipsum " * 500)  # ~1500 tokens in the next request
    h = Harness(HarnessConfig(cost=CostPolicy(max_input_tokens=2000, fallback_text=FALLBACK)),
                load_entry_points=False)
    model = ScriptedModel([calls(("fetch", {"url": "u"}), inp=400), text("never", inp=1900)])
    agent = make_agent(model, [fetch], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 1 and report.input_tokens == 400  # 80 % left, but the request needs more
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    [stop] = overspend_stops(report)
    assert "would pass max_input_tokens (2000; 400 used)" in stop


async def test_a_call_that_would_pass_the_output_token_cap_is_not_made():
    h = Harness(HarnessConfig(cost=CostPolicy(max_output_tokens=100, fallback_text=FALLBACK)),
                load_entry_points=False)
    model = ScriptedModel(searching(inp=10, out=40))
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    # 80 used; a third call of the largest output seen (40) would make 120
    assert len(model.calls) == 2 and report.output_tokens == 80
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


async def test_shadow_mode_records_the_overspend_and_calls_anyway():
    h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(cap_usd=0.10, prices=BIG)),
                load_entry_points=False)
    model = ScriptedModel([*[calls(("search", {"q": f"q{i}"}), inp=1000, out=1000) for i in range(3)],
                           text("done")], model="big")
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 4
    assert overspend_stops(report) and not any(d.enforced for d in report.decisions
                                               if d.point == "on_model_call" and d.action == "fallback")


# ------------------------------------------------------------ AgentScope's compression call



async def test_a_compression_that_would_take_the_spend_past_the_cap_is_not_made(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """AgentScope's own summary request (below ``on_model_call``) is held to
    the cap as any call: not made; the next call then ends the run."""
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(6000, 500)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    )
    # the first call costs $0.00208: $0.00042 are left for the summary, whole or shortened
    cost = CostPolicy(cap_usd=0.0025, prices={"gpt-test": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
    h, agent = real_agent(HarnessConfig(deadline_s=30.0, cost=cost),
                          make_model(server, stream=False, context_size=4000), [_page])
    await agent.reply(UserMsg("user", "read it"))
    report = h.last_report(agent)
    assert len(server.requests) == 1  # neither the summary nor the next call was made
    assert report.spent_usd <= 0.0025
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    skipped = [d.detail for d in report.decisions if d.point == "on_compress_context"]
    assert skipped and all("would take the spend past the cap" in d for d in skipped)


async def test_a_second_extension_adds_to_the_first():
    """Red team: after the second "+$0.05" the question still read "$0.1200
    of $0.1500" and no call was made: the first extension was lost."""
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices=BIG, on_exhausted="ask")),
                load_entry_points=False)
    model = ScriptedModel(searching(), model="big")
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)  # two calls ($0.08), then the question
    caps = []
    for _ in range(3):
        h.extend(agent, 0.05)
        _, final = await run(agent, "go on")
        caps.append(final.get_text_content().split("(")[1].split(")")[0])
    assert caps == ["$0.1200 of $0.1500 spent", "$0.2000 of $0.2000", "$0.2400 of $0.2500 spent"]
    assert len(model.calls) == 2 + 1 + 2 + 1


async def test_shadow_mode_records_an_unpriced_model_and_makes_the_call():
    """Shadow mode refuses nothing: the call is made, the refusal it would
    have been is recorded (red team: it answered with the fallback)."""
    h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(cap_usd=0.10, prices=BIG)), load_entry_points=False)
    model = ScriptedModel([text("hello")], model="not-listed")
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    assert final.get_text_content() == "hello" and len(model.calls) == 1
    assert any(d.action == "unpriced_model" for d in h.last_report(agent).decisions)


async def test_shadow_mode_records_each_call_over_the_cap_once_and_makes_it():
    h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(cap_usd=0.01, prices=BIG)), load_entry_points=False)
    model = ScriptedModel([*[searching()] * 3, text("done")], model="big")
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    over = [d for d in report.decisions if d.point == "on_model_call" and d.action == "fallback"]
    assert final.get_text_content() == "done" and len(model.calls) == 4
    # one each, never two (red team: the check after the admission recorded it again);
    # the first call, estimated before any output was seen, fitted
    assert len(over) == 3 and not any(d.enforced for d in over)

"""Token caps: run-wide input/output tokens (sub-agents included) on the USD
ladder (lower tier, then the fallback answer), and the per-request input cap
checked before the call from the payload AgentScope is about to send."""

from __future__ import annotations

import pytest
from scripted import RAN, ScriptedModel, calls, delegating_tool, fetching, make_agent, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState

FALLBACK = "Out of budget: here is where things stand."


def token_harness(**cost: object) -> tuple[Harness, ScriptedModel]:
    lite = ScriptedModel([text("lite answer", inp=10, out=1)], model="lite-model", repeat=True)
    cost.setdefault("fallback_text", FALLBACK)
    h = Harness(HarnessConfig(cost=CostPolicy(tier_models={"lite": lite}, **cost)),
                load_entry_points=False)
    return h, lite


def swaps(report) -> list[str]:
    return [d.detail for d in report.decisions if d.action == "swap_model"]


async def test_input_token_cap_steps_down_the_tiers_then_answers_with_the_fallback():
    h, lite = token_harness(max_input_tokens=10_000)
    # 4000 input tokens a call: 60% left, then 20% (minimal), then 5%: none
    model = ScriptedModel([calls(("search", {"q": str(i)}), inp=4000) for i in range(5)])
    agent = make_agent(model, [search], h.middlewares())
    lite.script = [calls(("search", {"q": "lite"}), inp=1500)]
    _, final = await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 2 and len(lite.calls) == 1  # the 3rd call went to the tier model
    assert swaps(report) == ["full -> minimal (2000 of 10000 input tokens left)"]
    assert report.input_tokens == 9500
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert final.get_text_content().startswith(FALLBACK)  # then what the run found
    assert "What I found before stopping:" in final.get_text_content()
    assert RAN == ["0", "1", "lite"]


async def test_output_token_cap_counts_like_money():
    h, _ = token_harness(max_output_tokens=100)
    model = ScriptedModel([calls(("search", {"q": "a"}), out=30), calls(("search", {"q": "b"}), out=30),
                           text("never")])
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 2  # 40% left after the 2nd call: the lite model serves the 3rd
    assert report.output_tokens == 30 + 30 + 1
    assert swaps(report) == ["full -> lite (40 of 100 output tokens left)"]


async def test_parallel_tool_calls_do_not_count_tokens_only_model_calls_do():
    h, _ = token_harness(max_input_tokens=10_000, tiers=(0.3, 0.2, 0.05))
    def batch(n: int):
        return calls(*[("search", {"q": f"{n}{c}"}) for c in "abc"], inp=3000)

    model = ScriptedModel([batch(1), batch(2), batch(3), text("never")])
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    # 3 model calls of 3000 tokens (9 tool calls): 7000, 4000, 1000 left; the 4th
    # pre_think sees 10% left: minimal tier, served by the lite model
    assert report.input_tokens == 9000 + 10
    assert report.tool_calls == {"search": 9}
    assert len(model.calls) == 3
    assert swaps(report) == ["full -> minimal (1000 of 10000 input tokens left)"]


async def test_a_sub_agents_tokens_spend_the_parents_cap():
    h = Harness(HarnessConfig(cost=CostPolicy(max_input_tokens=1000, fallback_text=FALLBACK)),
                load_entry_points=False)
    child_model = ScriptedModel([text("child found it", inp=900)])
    child = make_agent(child_model, [search], h.middlewares(), name="researcher")
    delegate = delegating_tool(child)

    parent_model = ScriptedModel([calls(("delegate", {"task": "find"}), inp=100), text("never")])
    parent = make_agent(parent_model, [delegate], h.middlewares(), name="lead")
    _, final = await run(parent)
    report = h.last_report(parent)
    assert len(parent_model.calls) == 1  # 1000 of 1000 spent with the child's 900
    assert report.input_tokens == 1000 and report.children[0].input_tokens == 900
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert final.get_text_content().startswith(FALLBACK)


# ------------------------------------------------------------ per request


async def test_a_request_over_the_per_request_cap_is_never_sent():
    fetch = fetching("x" * 8000)  # ~2000 tokens of tool result
    h = Harness(HarnessConfig(cost=CostPolicy(max_request_input_tokens=1500, fallback_text=FALLBACK)),
                load_entry_points=False)
    model = ScriptedModel([calls(("fetch", {"url": "u"})), text("never")])
    agent = make_agent(model, [fetch], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert len(model.calls) == 1  # the 2nd request (with the 8000-character result) was not sent
    assert report.model_calls == 1
    assert final.get_text_content().startswith(FALLBACK + "\n\nWhat I found before stopping:\n- fetch: ")
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    [stop] = [d for d in report.decisions if d.point == "on_model_call" and d.action == "fallback"]
    tokens = int(stop.detail.split("~")[1].split()[0])
    assert 2000 < tokens < 2300 and "max_request_input_tokens (1500)" in stop.detail


@pytest.mark.parametrize("cap,sent", [(10_000, 2), (1, 0)])
async def test_the_request_estimate_is_what_is_sent_over_four(cap: int, sent: int):
    h = Harness(HarnessConfig(cost=CostPolicy(max_request_input_tokens=cap)), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "a"})), text("ok")])
    agent = make_agent(model, [search], h.middlewares())
    await run(agent)
    assert len(model.calls) == sent


async def test_shadow_mode_records_the_request_cap_and_sends_anyway():
    h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(max_request_input_tokens=1)),
                load_entry_points=False)
    model = ScriptedModel([text("ok")])
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert final.get_text_content() == "ok" and len(model.calls) == 1
    [stop] = [d for d in report.decisions if d.point == "on_model_call"]
    assert stop.action == "fallback" and not stop.enforced

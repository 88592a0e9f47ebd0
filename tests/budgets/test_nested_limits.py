"""A sub-agent run by a tool answers to its parent's limits whichever Harness
it runs under (DESIGN §6.1): ``max_model_calls``, ``max_tool_calls``,
``cap_usd`` and the token caps of every run it is nested in hold, the
strictest winning; its spend is charged to each at that run's own prices."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel
from scripted import RAN, ScriptedModel, calls, delegating_tool, make_agent, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, RateLimit, TerminalState, harness_hook
from agentscope_harness.stores import MemoryStore

PRICES = {"lead-m": (10.0, 30.0), "child-m": (10.0, 30.0)}
"""USD per M tokens: a call of 1000 input and 1000 output tokens costs $0.04."""


def team(parent_config: HarnessConfig, child_config: HarnessConfig, child_step: Any,
         child_hooks: tuple[Any, ...] = ()) -> tuple[Harness, ScriptedModel, Any]:
    """A lead under ``parent_config`` whose tool runs a researcher under a
    Harness of its own (``child_config``: the specialist team's)."""
    child_h = Harness(child_config, hooks=child_hooks, load_entry_points=False)
    child_model = ScriptedModel(child_step, model="child-m")
    child = make_agent(child_model, [search], child_h.middlewares(), name="researcher")
    h = Harness(parent_config, load_entry_points=False)
    lead_model = ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m")
    lead = make_agent(lead_model, [delegating_tool(child)], h.middlewares(), name="lead")
    return h, child_model, lead


def searching(inp: int = 10, out: int = 10) -> Any:
    return lambda turn: calls(("search", {"q": f"c{len(RAN)}"}), inp=inp, out=out)


async def test_the_parents_model_call_cap_holds_under_another_harness():
    """Red team: the child's own uncapped Harness made 51 model calls under
    a parent with ``max_model_calls=6``."""
    h, child_model, lead = team(HarnessConfig(max_model_calls=4), HarnessConfig(), searching())
    await run(lead)
    report = h.last_report(lead)
    assert len(child_model.calls) == 3  # the lead's first call and the child's three: 4
    assert report.model_calls == 4
    [child] = report.children
    assert (child.terminal_state, child.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")


async def test_a_child_harness_with_a_lower_cap_holds_its_own_subtree_only():
    h, child_model, lead = team(HarnessConfig(max_model_calls=10), HarnessConfig(max_model_calls=2), searching())
    _, final = await run(lead)
    report = h.last_report(lead)
    assert len(child_model.calls) == 2  # the child's cap counts the child's calls, not the lead's
    assert report.children[0].reason == "max_model_calls"
    assert final.get_text_content() == "lead done" and report.model_calls == 4


async def test_the_parents_tool_call_cap_holds_under_another_harness():
    h, _, lead = team(HarnessConfig(max_tool_calls=3), HarnessConfig(),
                      [*[searching()] * 3, text("child done")])
    await run(lead)
    report = h.last_report(lead)
    assert len(RAN) == 2  # the delegate call and two searches: 3
    [child] = report.children
    assert child.refusals.get("quota_exhausted", 0) >= 1


async def test_the_parents_cap_usd_holds_under_an_unpriced_child_harness():
    """The child's Harness has no ``CostPolicy`` at all: its calls cost the
    lead's budget at the lead's prices, and one that would pass it is not made."""
    parent = HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices=PRICES))
    h, child_model, lead = team(parent, HarnessConfig(), searching(inp=1000, out=1000))
    await run(lead)
    report = h.last_report(lead)
    # the lead's call ($0.0013), then two of the child's ($0.08); a third would pass $0.10
    assert len(child_model.calls) == 2
    assert report.spent_usd == pytest.approx(0.0813) and report.spent_usd <= 0.10
    [child] = report.children
    assert (child.terminal_state, child.reason) == (TerminalState.INCOMPLETE, "budget")
    assert child.spent_usd == 0  # its own Harness prices nothing
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


async def test_a_child_model_the_capped_parent_cannot_price_is_never_called():
    parent = HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices={"lead-m": (10.0, 30.0)}))
    h, child_model, lead = team(parent, HarnessConfig(), searching())
    await run(lead)
    report = h.last_report(lead)
    assert child_model.calls == []
    assert report.children[0].reason == "unpriced_model"


async def test_the_parents_token_caps_hold_under_another_harness():
    parent = HarnessConfig(cost=CostPolicy(max_output_tokens=100))
    h, child_model, lead = team(parent, HarnessConfig(), searching(out=40))
    await run(lead)
    report = h.last_report(lead)
    # the lead's 10, then the child's 40 and 40: a third of 40 would pass 100
    assert len(child_model.calls) == 2 and report.output_tokens == 90
    assert report.children[0].reason == "budget"


class _Slow(ScriptedModel):
    """A scripted model that takes a moment, so parallel calls overlap, and
    declares ``max_tokens`` (the output estimate: a bound)."""

    class Parameters(BaseModel):
        max_tokens: int = 1000

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.02)
        return await super()._call_api(*args, **kwargs)


@pytest.mark.parametrize("waiting", [False, True])
@pytest.mark.parametrize("same_harness", [True, False])
async def test_parallel_sub_agents_see_each_others_calls_in_flight(same_harness: bool, waiting: bool):
    """Red team: three children run at once, each call estimated within the
    cap on its own; together they spent $0.0919 of $0.05. Second pass: the
    same when a rate limit made the calls wait between check and call."""
    store = MemoryStore()
    limits: list[RateLimit] = []
    if waiting:  # the fleet used this minute's calls: each call waits its turn
        await store.rate_acquire("rate:model:calls:principal:-", 120, 120)
        limits = [RateLimit(scope="principal", calls_per_min=120, wait_s=10)]
    h = Harness(HarnessConfig(store=store, rate_limits=limits, cost=CostPolicy(cap_usd=0.05, prices=PRICES)),
                load_entry_points=False)
    child_h = h if same_harness else Harness(HarnessConfig(store=store, rate_limits=limits), load_entry_points=False)
    children, tools = [], []
    for i in range(3):
        model = _Slow([text(f"child {i} done", inp=50, out=1000)], model="child-m")
        children.append(model)
        tool = delegating_tool(make_agent(model, [search], child_h.middlewares(), name=f"r{i}"))
        tool.__name__ = f"delegate{i}"
        tools.append(tool)
    lead_model = _Slow([calls(*[(f"delegate{i}", {"task": "x"}) for i in range(3)], inp=10, out=10),
                        text("lead done")], model="lead-m")
    lead = make_agent(lead_model, tools, h.middlewares(), name="lead")
    await run(lead)
    report = h.last_report(lead)
    assert sum(len(m.calls) for m in children) == 1  # $0.0305 each: a second would pass $0.05
    assert report.spent_usd <= 0.05


async def test_a_shadow_sub_agent_spends_within_its_enforcing_parents_caps():
    parent = HarnessConfig(max_model_calls=4, cost=CostPolicy(cap_usd=0.10, prices=PRICES))
    h, child_model, lead = team(parent, HarnessConfig(mode="shadow"), searching(inp=10, out=10))
    await run(lead)
    assert len(child_model.calls) == 3  # the parent's max_model_calls binds the shadow child
    h, child_model, lead = team(parent.model_copy(update={"max_model_calls": None}),
                                HarnessConfig(mode="shadow"), searching(inp=1000, out=1000))
    await run(lead)
    assert len(child_model.calls) == 2 and h.last_report(lead).spent_usd <= 0.10


@harness_hook("pre_tool_call", priority=60, name="yielding_gate", kind="safety")
async def yielding_gate(ctx: Any) -> None:
    """A gate that awaits (a store, a service): parallel calls' judging interleaves."""
    await asyncio.sleep(0.01)


async def test_a_shadow_sub_agent_calls_tools_within_its_enforcing_parents_tool_cap():
    """Red team: the shadow child's own spend_gate only recorded the
    enforcing parent's ``max_tool_calls``, so its searches ran past it."""
    parent = HarnessConfig(max_tool_calls=3)
    h, _, lead = team(parent, HarnessConfig(mode="shadow"), [*[searching()] * 4, text("child done")])
    await run(lead)
    assert len(RAN) == 2  # the delegate call and two searches: 3
    [child] = h.last_report(lead).children
    refused = [d for d in child.decisions if d.code == "quota_exhausted"]
    assert refused and all(d.enforced for d in refused)
    # a parallel batch whose judging yields (an async gate): all three are
    # judged before any is admitted, so the cap holds at admission
    RAN.clear()
    batch = calls(*[("search", {"q": q}) for q in "abc"])
    h, _, lead = team(parent, HarnessConfig(mode="shadow"), [batch, text("child done")], (yielding_gate,))
    await run(lead)
    assert RAN == ["a", "b"]  # the delegate call and two of the three searches: 3


async def test_a_shadow_parents_caps_do_not_stop_an_enforcing_sub_agent():
    parent = HarnessConfig(mode="shadow", max_model_calls=2, cost=CostPolicy(cap_usd=0.01, prices=PRICES))
    h, child_model, lead = team(parent, HarnessConfig(), [searching(inp=1000, out=1000)] * 3 + [text("found")])
    _, final = await run(lead)
    assert len(child_model.calls) == 4  # recorded by the shadow policy, never enforced on the child
    assert h.last_report(lead).children[0].terminal_state == TerminalState.COMPLETED


async def test_a_shadow_sub_agent_cannot_call_a_model_its_enforcing_parent_cannot_price():
    """Red team: the child made 9 calls of an unlisted model, charged $0."""
    parent = HarnessConfig(cost=CostPolicy(cap_usd=0.10, prices={"lead-m": (10.0, 30.0)}))
    h, child_model, lead = team(parent, HarnessConfig(mode="shadow"), searching())
    await run(lead)
    assert len(child_model.calls) == 0
    assert h.last_report(lead).children[0].reason == "unpriced_model"


@pytest.mark.parametrize("child_mode", ["enforce", "shadow"])
async def test_the_parents_request_cap_holds_under_another_harness(child_mode: str):
    """Red team: ``max_request_input_tokens`` was read from the config of the
    Harness a call runs under: a sub-agent under its own uncapped (or
    shadow) Harness sent requests over the lead's cap. Now the strictest
    cap of every enclosing enforcing run holds; a shadow lead's lends none."""
    big = "lorem ipsum " * 2000  # ~6,000 tokens once in the sub-agent's context
    h, child_model, lead = team(HarnessConfig(cost=CostPolicy(max_request_input_tokens=3000)),
                                HarnessConfig(mode=child_mode),
                                [lambda turn: calls(("search", {"q": big})), text("child done")])
    await run(lead)
    [child] = h.last_report(lead).children
    assert len(child_model.calls) == 1  # the second request would carry the big search: not sent
    assert (child.terminal_state, child.reason) == (TerminalState.INCOMPLETE, "budget")
    h, child_model, lead = team(HarnessConfig(mode="shadow", cost=CostPolicy(max_request_input_tokens=3000)),
                                HarnessConfig(), [lambda turn: calls(("search", {"q": big})), text("child done")])
    await run(lead)
    assert len(child_model.calls) == 2  # recorded by the shadow lead's policy, never enforced

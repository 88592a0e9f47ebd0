"""budget.py: spend_gate, search_gate, budget_router, result_nudges,
strategy_feedback."""

from __future__ import annotations

import json

import pytest
from agentscope.message import TextBlock
from agentscope.tool import FunctionTool, ToolChunk, ToolGroup, Toolkit
from hookkit import Ran, drive, harnessed, results, shop_tools
from scripted import ALLOW, ScriptedModel, calls, make_agent, text

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    MemoryStore,
    Principal,
    ToolPolicy,
    harness_hook,
)

U42 = Principal(user_id="u-42", tenant="acme")


def ledger_config(cap: int, units: int = 1, soft_at: int | None = None, **kw) -> HarnessConfig:
    return HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"], units=units)},
        ledgers={"retrieval": Ledger(cap=cap, soft_at=soft_at)},
        **kw,
    )


# --------------------------------------------------------------- spend_gate


async def test_ledger_cap_refuses_the_call_that_would_exceed_it():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        ledger_config(cap=2),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("search", {"q": "c"})), calls(("search", {"q": "d"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert [m.startswith("[harness:quota_exhausted]") for m in msgs] == [False, False, True, True]
    assert "(2/2)" in msgs[2]
    assert [a["q"] for a in ran.of("search")] == ["a", "b"]
    assert report.refusals == {"quota_exhausted": 2}
    assert report.tool_calls == {"search": 2}
    assert not any(d.action == "allow_escape" for d in report.decisions)


async def test_units_are_charged_per_call():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        ledger_config(cap=3, units=2),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert "3 products for a" in msgs[0]
    assert msgs[1].startswith("[harness:quota_exhausted]") and "(2/3)" in msgs[1]
    assert len(ran) == 1


async def test_one_unit_left_three_parallel_calls_exactly_one_runs():
    ran = Ran()
    t = shop_tools(ran, delay=0.02)
    h, model, agent = harnessed(
        ledger_config(cap=1),
        [calls(("search", {"q": "a"}), ("search", {"q": "b"}), ("search", {"q": "c"})),
         text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert len(msgs) == 3
    assert sum(m.startswith("[harness:quota_exhausted]") for m in msgs) == 2
    assert sum("3 products for" in m for m in msgs) == 1
    assert len(ran) == 1
    assert report.refusals == {"quota_exhausted": 2}
    assert report.tool_calls == {"search": 1}


async def test_refused_by_a_later_gate_is_not_charged():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        ledger_config(cap=2),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "a"})),
         calls(("search", {"q": "b"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:duplicate_call]")
    assert "3 products for b" in msgs[2]  # the refused duplicate gave its unit back
    assert [a["q"] for a in ran.of("search")] == ["a", "b"]
    assert report.refusals == {"duplicate_call": 1}


async def test_run_wide_max_tool_calls():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(max_tool_calls=2),
        [calls(("search", {"q": "a"}), ("select", {"pick": "x"})),
         calls(("lookup_order", {"order_id": "o1", "user_id": "u"})), text("done")],
        [t["search"], t["select"], t["lookup_order"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[2].startswith("[harness:quota_exhausted]")
    assert "tool-call limit" in msgs[2] and "(2/2)" in msgs[2]
    assert sorted(name for name, _ in ran) == ["search", "select"]
    assert report.refusals == {"quota_exhausted": 1}


@pytest.mark.parametrize("candidate", [False, True])
async def test_max_tool_calls_does_not_count_the_toolkits_meta_tool(candidate):
    # README row 9: switching tool groups (reset_tools) changes what the model
    # is offered and acts on nothing: the cap counts the two searches only
    # (and a candidate with the same cap judges the same)
    ran = Ran()
    t = shop_tools(ran)
    toolkit = Toolkit(tool_groups=[ToolGroup(name="shop", description="The shop's tools.",
                                             tools=[FunctionTool(t["search"], permission=ALLOW)])])
    config = HarnessConfig(max_tool_calls=2)
    h = Harness(config, candidate=config if candidate else None, load_entry_points=False)
    h, model, agent = harnessed(
        None,
        [calls(("reset_tools", {"shop": True})), calls(("search", {"q": "a"})),
         calls(("search", {"q": "b"})), calls(("search", {"q": "c"})), text("done")],
        h.instrument(toolkit), harness=h,
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert [q["q"] for _, q in ran] == ["a", "b"]
    assert msgs[3].startswith("[harness:quota_exhausted]") and "(2/2)" in msgs[3]
    assert report.tool_calls == {"reset_tools": 1, "search": 2}
    assert report.refusals == {"quota_exhausted": 1}
    assert report.candidate_differences == []


async def test_a_sub_agents_finishing_call_refused_by_its_leads_cap_is_said_in_its_report():
    # README "What the caller receives", finish_tool_not_called: a sub-agent's
    # finishing call counts on the lead's max_tool_calls (it answers its lead)
    from scripted import delegating_tool

    ran = Ran()
    t = shop_tools(ran)
    h = Harness(HarnessConfig(max_tool_calls=2, tools={"submit": ToolPolicy(role="finish")}),
                load_entry_points=False)
    child_model = ScriptedModel([calls(("search", {"q": "a"})), calls(("submit", {"answer": "mugs"})),
                                 text("mugs"), text("mugs"), text("mugs")])
    child = make_agent(child_model, [t["search"], t["submit"]], middlewares=h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "t"})), calls(("submit", {"answer": "done"})),
                                text("done")])
    lead = make_agent(lead_model, [delegating_tool(child), t["submit"]], middlewares=h.middlewares(),
                      name="lead")
    _, _, report = await drive(h, lead)
    assert [name for name, _ in ran] == ["search", "submit"]  # the lead's own answer is uncapped
    assert results(child_model)[1].startswith("[harness:quota_exhausted]")
    (sub,) = report.children
    assert (sub.terminal_state.value, sub.reason, sub.refusals) == (
        "incomplete", "finish_tool_not_called", {"quota_exhausted": 1})
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")


# -------------------------------------------------------------- search_gate


async def test_search_gate_refuses_then_latches_open_after_two_rounds():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, enough_candidates=1),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("search", {"q": "c"})), calls(("search", {"q": "d"})),
         calls(("search", {"q": "e"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:enough_results]")
    assert msgs[2].startswith("[harness:enough_results]")
    assert "3 products for d" in msgs[3]  # escape: the presumption was wrong twice
    assert "3 products for e" in msgs[4]  # and it stays latched for the run
    assert [a["q"] for a in ran.of("search")] == ["a", "d", "e"]
    assert report.refusals == {"enough_results": 2}
    assert [d.action for d in report.decisions if d.hook == "search_gate"] == [
        "refuse", "refuse", "allow_escape",
    ]


async def test_search_gate_parallel_refusals_count_once():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, enough_candidates=1),
        [calls(("search", {"q": "a"})),
         calls(("search", {"q": "b"}), ("search", {"q": "c"}), ("search", {"q": "d"})),
         calls(("search", {"q": "e"})),
         calls(("search", {"q": "f"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert all(m.startswith("[harness:enough_results]") for m in msgs[1:4])
    assert msgs[4].startswith("[harness:enough_results]")  # second round: count 2
    assert "3 products for f" in msgs[5]
    assert [a["q"] for a in ran.of("search")] == ["a", "f"]
    assert report.refusals == {"enough_results": 4}


async def test_search_gate_reads_candidates_from_tool_metadata():
    ran = Ran()

    async def search(q: str) -> ToolChunk:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return ToolChunk(content=[TextBlock(text="red mug")], metadata={"harness": {"candidates": 3}})

    h, model, agent = harnessed(
        HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}, enough_candidates=3),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")],
        [search],
    )
    _, _, report = await drive(h, agent)
    msg = results(model)[1]
    assert msg.startswith("[harness:enough_results]") and "3 candidates" in msg
    assert len(ran) == 1


# ------------------------------------------------------------ budget_router


def priced(cap_usd=1.0, per_call=0.6, on_output=False, **kw) -> CostPolicy:
    # usage per scripted call: 100 input tokens, 10 output tokens
    # on_output: the price is all the output's, so the request's own estimate
    # (checked against cap_usd before each call) costs nothing
    # the lite tier model is free, and says so: an unpriced model is a config error
    price = (0.0, per_call * 100_000) if on_output else (per_call * 10_000, 0.0)
    return CostPolicy(cap_usd=cap_usd, prices={"scripted": price, "lite": (0.0, 0.0)}, **kw)


async def test_router_swaps_to_the_lite_model_when_half_the_money_is_gone():
    ran = Ran()
    t = shop_tools(ran)
    lite = ScriptedModel([text("lite answer")], model="lite")
    h, model, agent = harnessed(
        HarnessConfig(cost=priced(on_output=True, tier_models={"lite": lite})),
        [calls(("search", {"q": "a"})), text("full answer")],
        [t["search"]],
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 1
    assert len(lite.calls) == 1
    assert lite.calls[0]["model"] == "lite"
    assert final.get_text_content() == "lite answer"
    assert abs(report.spent_usd - 0.6) < 1e-9  # lite has no price: free
    assert report.model_calls == 2
    assert report.terminal_state.value == "completed"
    swaps = [d.detail for d in report.decisions if d.action == "swap_model"]
    assert len(swaps) == 1 and swaps[0].startswith("full -> lite")


@pytest.mark.parametrize("caps, used, named", [
    ((18_000, 20_000), (9_000, 10_000), "10000 of 20000 output tokens left"),  # a tie: the first in words
    ((2_000, 20_000), (1_000, 10_000), "1000 of 2000 input tokens left"),
    ((2_000, 20_000), (1_200, 2_000), "800 of 2000 input tokens left"),
])
async def test_the_tier_change_names_the_budget_with_least_left(caps, used, named):
    ran = Ran()
    t = shop_tools(ran)
    lite = ScriptedModel([text("answer", inp=1, out=1)], model="lite")
    cost = CostPolicy(max_input_tokens=caps[0], max_output_tokens=caps[1], tier_models={"lite": lite})
    h, _, agent = harnessed(HarnessConfig(cost=cost), [calls(("search", {"q": "a"}), inp=used[0], out=used[1])],
                            [t["search"]])
    _, _, report = await drive(h, agent)
    swaps = [d.detail for d in report.decisions if d.action == "swap_model"]
    assert swaps == [f"full -> lite ({named})"]
    assert len(lite.calls) == 1


async def test_no_tier_model_no_swap_told_or_recorded():
    """Without ``tier_models`` the run keeps its model: a quarter of its
    output tokens left, no ``swap_model`` is recorded and the status line
    does not tell the model it is on a cheaper one."""
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(cost=CostPolicy(max_output_tokens=20_000), disclose_budget="every_call"),
        [calls(("search", {"q": "a"}), inp=1, out=15_000), text("answer", inp=1, out=1)],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    assert [d for d in report.decisions if d.action == "swap_model"] == []
    told = json.dumps(model.calls[-1]["messages"], default=str)
    assert "[harness:budget]" in told and "now on the" not in told


async def test_router_falls_back_without_calling_any_model():
    ran = Ran()
    t = shop_tools(ran)
    lite = ScriptedModel([], model="lite")
    cost = priced(per_call=0.96, on_output=True, tier_models={"lite": lite})
    h, model, agent = harnessed(
        HarnessConfig(cost=cost),
        [calls(("search", {"q": "a"})), text("never")],
        [t["search"]],
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 1 and lite.calls == []
    # the fallback, then what the run found before it was stopped
    assert final.get_text_content().startswith(cost.fallback_text)
    assert "What I found before stopping:\n- search: 3 products for a" in final.get_text_content()
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "budget"
    assert report.model_calls == 1


async def test_router_exhausted_daily_quota_means_no_model_call_at_all():
    store = MemoryStore()
    await store.add_spend(U42.key, 2.0)
    cost = priced(cap_usd=None, daily_quota_usd=2.0)
    h, model, agent = harnessed(HarnessConfig(cost=cost, store=store), [text("never")], [])
    _, final, report = await drive(h, agent, U42)
    assert model.calls == []
    assert final.get_text_content() == cost.fallback_text
    assert (report.terminal_state.value, report.reason) == ("incomplete", "budget")


# ------------------------------------------------------------ result_nudges


async def test_result_nudges_soft_and_spent_once_each():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        ledger_config(cap=3, soft_at=2),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("search", {"q": "c"})), text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert "quota" not in msgs[0]
    assert "nearly used up (2/3)" in msgs[1]
    assert "now used up (3/3)" in msgs[2] and "nearly" not in msgs[2]
    # notices sit after the fence, outside the tool's data
    assert msgs[1].index("</tool-output") < msgs[1].index("Note:")


@harness_hook("pre_think", priority=30, name="conclude_after_first_round", kind="observer")
def conclude_after_first_round(ctx) -> None:
    if ctx.run.model_calls >= 1:
        ctx.facts.force_conclude = True


async def test_result_nudge_when_force_conclude_is_set():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools={"search": ToolPolicy(role="retrieval")}),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("search", {"q": "c"})), text("done")],
        [t["search"]], hooks=(conclude_after_first_round,),
    )
    await drive(h, agent)
    msgs = results(model)
    assert "conclude now" not in msgs[0]
    assert msgs[1].endswith("Note: Stop retrieving and conclude now.")
    assert "conclude now" not in msgs[2]  # once


# -------------------------------------------------------- strategy_feedback


class SpendOnly:
    """A store of the daily spend alone (no reservations): each model call
    is charged as it is spent (reservations: tests/fleet/test_harness_fleet.py)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def get_spend(self, key, day=None, *, deadline=None):
        return await self.inner.get_spend(key, day)

    async def add_spend(self, key, usd, day=None, *, deadline=None):
        return await self.inner.add_spend(key, usd, day)


async def test_daily_spend_is_charged_and_the_next_run_sees_less_quota():
    store = SpendOnly()
    lite = ScriptedModel([text("lite answer")], model="lite")
    cost = priced(cap_usd=None, per_call=0.3, daily_quota_usd=1.0, tier_models={"lite": lite})
    h = Harness(HarnessConfig(cost=cost, store=store), load_entry_points=False)
    ran = Ran()
    t = shop_tools(ran)

    def agent_with(script):
        model = ScriptedModel(script)
        return model, make_agent(model, [t["search"]], middlewares=h.middlewares())

    m1, a1 = agent_with([calls(("search", {"q": "a"})), text("first")])
    _, _, r1 = await drive(h, a1, U42)
    assert abs(r1.spent_usd - 0.6) < 1e-9
    assert abs(await store.get_spend(U42.key) - 0.6) < 1e-9
    assert lite.calls == [] and len(m1.calls) == 2  # 0.4 of 1.0 left: still full

    # 0.4 left today: after one 0.3 call only a quarter is left -> lite
    m2, a2 = agent_with([calls(("search", {"q": "b"})), text("never")])
    _, final, r2 = await drive(h, a2, U42)
    assert len(m2.calls) == 1 and len(lite.calls) == 1
    assert final.get_text_content() == "lite answer"
    assert abs(await store.get_spend(U42.key) - 0.9) < 1e-9
    assert any(d.action == "swap_model" for d in r2.decisions)

    # another principal has their own quota
    m3, a3 = agent_with([calls(("search", {"q": "c"})), text("third")])
    _, _, r3 = await drive(h, a3, Principal(user_id="u-7", tenant="acme"))
    assert len(m3.calls) == 2 and len(lite.calls) == 1
    assert abs(await store.get_spend("acme/u-7") - 0.6) < 1e-9
    assert r3.principal["user_id"] == "u-7"


async def test_report_is_settled_and_emitted_once():
    seen = []
    h, model, agent = harnessed(HarnessConfig(on_report=seen.append), [text("hi")], [])
    events, _, report = await drive(h, agent)
    assert seen == [report]
    emitted = [e for e in events if getattr(e, "name", None) == "harness.report"]
    assert len(emitted) == 1
    assert emitted[0].value["run_id"] == report.run_id
    assert emitted[0].value["terminal_state"] == "completed"
    assert len(h.table) == 0

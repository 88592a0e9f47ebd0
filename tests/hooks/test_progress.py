"""progress.py: phase_check, transition_notice, phase_step."""

from __future__ import annotations

from agentscope.message import TextBlock
from agentscope.tool import ToolChunk
from hookkit import Ran, drive, harnessed, hint_texts, results, shop_tools, stored_results
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy, harness_hook


def progress_config(submit: ToolPolicy | None = None, select: ToolPolicy | None = None, **kw):
    return HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval"),
            "select": select or ToolPolicy(role="selection"),
            "submit": submit or ToolPolicy(role="finish", requires_facts=["retrieved", "selected"]),
        },
        **kw,
    )


# -------------------------------------------------------------- phase_check


async def test_finish_tool_waits_for_its_required_facts():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        progress_config(),
        [calls(("submit", {"answer": "a"})), calls(("submit", {"answer": "a"})),
         calls(("search", {"q": "mug"})), calls(("submit", {"answer": "b"})),
         calls(("select", {"pick": "red"})), calls(("submit", {"answer": "c"})),
         text("never asked for")],
        [t["search"], t["select"], t["submit"]],
    )
    _, final, report = await drive(h, agent)
    msgs = stored_results(agent)
    assert msgs[0].startswith("[harness:not_ready]")
    assert "retrieve results with a search tool; select from the candidates" in msgs[0]
    assert msgs[1].startswith("[harness:not_ready]")  # a safety gate: no escape
    assert msgs[3].startswith("[harness:not_ready]")
    assert "retrieve" not in msgs[3] and "select from the candidates" in msgs[3]
    assert "delivered" in msgs[5]
    assert final.get_text_content() == "c"  # the finished answer, no extra round
    assert len(model.calls) == 6
    assert ran.of("submit") == [{"answer": "c"}]
    assert report.refusals == {"not_ready": 3}
    assert report.terminal_state.value == "completed"
    assert set(report.facts) >= {"retrieved", "selected", "finished"}


@harness_hook("pre_think", priority=30, name="conclude_once_retrieved", kind="observer")
def conclude_once_retrieved(ctx) -> None:
    if "retrieved" in ctx.facts.progress_marks:
        ctx.facts.force_conclude = True


@harness_hook("pre_think", priority=30, name="conclude_from_the_start", kind="observer")
def conclude_from_the_start(ctx) -> None:
    ctx.facts.force_conclude = True


WAIVABLE = ToolPolicy(role="finish", requires_facts=["retrieved", "selected"], waivable_facts=["selected"])


async def test_force_conclude_waives_only_the_waivable_facts():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        progress_config(submit=WAIVABLE),
        [calls(("submit", {"answer": "a"})), calls(("search", {"q": "mug"})),
         calls(("submit", {"answer": "b"})), text("Delivered.")],
        [t["search"], t["select"], t["submit"]], hooks=(conclude_once_retrieved,),
    )
    _, _, report = await drive(h, agent)
    msgs = stored_results(agent)
    assert msgs[0].startswith("[harness:not_ready]")
    assert "delivered" in msgs[2]  # "selected" waived under force_conclude
    assert model.calls[2]["tool_choice"].mode == "submit"
    assert ran.of("submit") == [{"answer": "b"}]
    assert report.terminal_state.value == "completed"


async def test_force_conclude_never_waives_a_fact_not_listed():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        progress_config(submit=WAIVABLE, max_enforce_retries=0),
        [calls(("submit", {"answer": "a"})), text("I could not find anything.")],
        [t["search"], t["select"], t["submit"]], hooks=(conclude_from_the_start,),
    )
    _, _, report = await drive(h, agent)
    msg = results(model)[0]
    assert msg.startswith("[harness:not_ready]") and "retrieve results" in msg
    assert "select from" not in msg  # waived
    assert ran == []
    assert report.terminal_state.value == "incomplete"


# -------------------------------------------------------- transition_notice


async def test_transition_notice_on_the_first_candidates_only():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        progress_config(require_finish_tool=False),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("select", {"pick": "red"})), text("done")],
        [t["search"], t["select"], t["submit"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[0].endswith("Note: You have results now: select the best ones, or answer if you have enough.")
    assert "Note:" not in msgs[1]
    assert msgs[2].endswith("Note: You have a selection now: finish the task with it.")
    assert [d.detail for d in report.decisions if d.hook == "transition_notice"] == [
        "reached retrieved", "reached selected",
    ]


async def test_transition_notice_for_a_custom_fact_reported_in_metadata():
    async def make_plan(goal: str) -> ToolChunk:
        """Plan the task.

        Args:
            goal (str): The goal.
        """
        return ToolChunk(content=[TextBlock(text="1. search 2. pick")], metadata={"harness": {"facts": ["planned"]}})

    h, model, agent = harnessed(
        HarnessConfig(), [calls(("make_plan", {"goal": "mug"})), text("ok")], [make_plan],
    )
    _, _, report = await drive(h, agent)
    assert results(model)[0].endswith("Note: You have a plan now: carry it out step by step.")
    assert "planned" in report.facts


# --------------------------------------------------------------- phase_step


def candidate_search(ran: Ran, n: int):
    async def search(q: str) -> ToolChunk:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return ToolChunk(content=[TextBlock(text=f"{n} mugs for {q}")], metadata={"harness": {"candidates": n}})

    return search


def empty_select_by_metadata(ran: Ran):
    async def select(pick: str) -> ToolChunk:
        """Select products from the candidates.

        Args:
            pick (str): What to pick.
        """
        ran.append(("select", {"pick": pick}))
        return ToolChunk(content=[TextBlock(text="none of them match")], metadata={"harness": {"picks": 0}})

    return select


async def _reopen(select_tool, select_policy):
    ran = Ran()
    h, model, agent = harnessed(
        progress_config(select=select_policy, enough_candidates=3, require_finish_tool=False),
        [calls(("search", {"q": "mug"})), calls(("search", {"q": "cup"})),
         calls(("select", {"pick": "red"})), calls(("search", {"q": "red cup"})),
         text("done")],
        [candidate_search(ran, 3), select_tool(ran)],
    )
    _, _, report = await drive(h, agent)
    return ran, model, report


async def test_selection_rejecting_everything_reopens_retrieval_metadata_path():
    ran, model, report = await _reopen(empty_select_by_metadata, ToolPolicy(role="selection"))
    msgs = results(model)
    assert msgs[1].startswith("[harness:enough_results]")
    assert "3 mugs for red cup" in msgs[3]  # retrieval open again
    assert [a["q"] for a in ran.of("search")] == ["mug", "red cup"]
    hints = hint_texts(model.calls[-1])
    assert len(hints) == 1 and "None of the candidates fit. Search again" in hints[0]
    assert any(
        d.hook == "phase_step" and d.action == "hint" and "Search again" in d.detail
        for d in report.decisions
    )


async def test_selection_rejecting_everything_reopens_retrieval_count_results_path():
    def plain_select(ran):
        async def select(pick: str) -> str:
            """Select products from the candidates.

            Args:
                pick (str): What to pick.
            """
            ran.append(("select", {"pick": pick}))
            return "checked them all"

        return select

    ran, model, report = await _reopen(
        plain_select, ToolPolicy(role="selection", count_results=lambda text: 0),
    )
    msgs = results(model)
    assert msgs[1].startswith("[harness:enough_results]")
    assert "3 mugs for red cup" in msgs[3]
    assert any("None of the candidates fit" in h for h in hint_texts(model.calls[-1]))


async def test_default_count_a_plain_nonempty_result_is_one_candidate():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        progress_config(enough_candidates=1, require_finish_tool=False),
        [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
         calls(("select", {"pick": "red"})), text("done")],
        [t["search"], t["select"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:enough_results]") and "1 candidates" in msgs[1]
    # a non-empty plain selection counts as a pick: nothing is re-opened
    assert not any(d.hook == "phase_step" for d in report.decisions)


async def test_two_empty_selections_in_a_row_widen_the_search():
    ran = Ran()
    h, model, agent = harnessed(
        progress_config(require_finish_tool=False),
        [calls(("search", {"q": "mug"})), calls(("select", {"pick": "red"})),
         calls(("select", {"pick": "blue"})), calls(("search", {"q": "cup"})),
         calls(("search", {"q": "jar"})), text("done")],
        [candidate_search(ran, 2), empty_select_by_metadata(ran)],
    )
    _, _, report = await drive(h, agent)
    widen = [
        (i, h_) for i, call in enumerate(model.calls) for h_ in hint_texts(call)
        if "Widen the search" in h_
    ]
    assert widen, [hint_texts(c) for c in model.calls]
    first = widen[0][0]
    assert first >= 4  # only after the second empty selection was seen
    # the same hint is never given twice in a row
    assert sum("Widen the search" in h_ for h_ in hint_texts(model.calls[-1])) == 1
    assert any(
        d.hook == "phase_step" and d.action == "hint" and d.detail.startswith("Two selections")
        for d in report.decisions
    )

"""repetition.py: repeat_call_gate (duplicates, repeated failures, the loop
detector); and a stubborn model stopped end to end."""

from __future__ import annotations

from agentscope.tool import FunctionTool, Toolkit
from hookkit import Ran, drive, harnessed, hint_texts, results, shop_tools
from scripted import ALLOW, calls, text

from agentscope_harness import DependencyDown, HarnessConfig, ToolPolicy

SEARCH = {"search": ToolPolicy(role="retrieval")}


def tool_results(call) -> list[dict]:
    return [m for m in call["formatted"] if m["role"] == "tool"]


async def test_duplicate_of_a_succeeded_call_points_to_the_earlier_result():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": "red mug"})), calls(("search", {"q": "red mug"})),
         text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    first, second = tool_results(model.calls[-1])
    assert second["content"].startswith("[harness:duplicate_call]")
    assert second["content"].endswith(f"(ref: {first['tool_call_id']})")
    assert len(ran) == 1
    assert report.refusals == {"duplicate_call": 1}
    assert report.tool_calls == {"search": 1}


async def test_a_value_written_with_other_spacing_is_another_call_not_a_duplicate():
    # "A 1", "A  1" and "A\u20031" are different orders to a backend: the model
    # is never told to reuse one's result for another
    ran = Ran()
    t = shop_tools(ran)
    ids = ["A 1", "A  1", "A\u20031", " A 1"]
    h, model, agent = harnessed(
        HarnessConfig(tools={"lookup_order": ToolPolicy(role="lookup")}),
        [calls(("lookup_order", {"order_id": i, "user_id": "u"})) for i in ids] + [text("done")],
        [t["lookup_order"]],
    )
    _, _, report = await drive(h, agent)
    assert [a["order_id"] for a in ran.of("lookup_order")] == ids
    assert not any(m.startswith("[harness:") for m in results(model))
    assert report.refusals == {}


async def test_a_failed_program_rewritten_with_other_indentation_is_not_a_repeated_failure():
    ran = Ran()

    async def run_python(code: str) -> str:
        """Run a Python snippet.

        Args:
            code (str): The program.
        """
        ran.append(("run_python", {"code": code}))
        compile(code, "<snippet>", "exec")  # raises on bad indentation
        return "ran"

    bad = "if True:\nprint(1)"
    fixed = "if True:\n    print(1)"
    h, model, agent = harnessed(
        HarnessConfig(breaker_failures=100, loop_window=10, loop_threshold=10),
        [calls(("run_python", {"code": bad}))] * 3 + [calls(("run_python", {"code": fixed})), text("ok")],
        [run_python],
    )
    _, _, report = await drive(h, agent)
    assert [a["code"] for a in ran.of("run_python")] == [bad] * 3 + [fixed]
    assert results(model)[-1] != "" and "ran" in results(model)[-1]
    assert "repeated_failure" not in report.refusals


async def test_duplicate_within_one_parallel_batch():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": "mug"}), ("search", {"q": "mug"}), ("search", {"q": "cup"})),
         text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert sum(m.startswith("[harness:duplicate_call]") for m in msgs) == 1
    assert "appears twice in this turn" in next(m for m in msgs if m.startswith("[harness:"))
    assert sorted(a["q"] for a in ran.of("search")) == ["cup", "mug"]
    assert report.refusals == {"duplicate_call": 1}


async def test_duplicate_refusal_is_a_presumption_that_latches_open():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": "mug"}))] * 4 + [text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert [m.startswith("[harness:duplicate_call]") for m in msgs] == [False, True, True, False]
    assert len(ran) == 2
    assert any(d.action == "allow_escape" and d.hook == "repeat_call_gate" for d in report.decisions)


async def test_same_failure_max_identical_failures_times_is_refused_for_good():
    ran = Ran()

    async def charge(card: str) -> str:
        """Charge a card.

        Args:
            card (str): The card.
        """
        ran.append(("charge", {"card": card}))
        if card == "4111":
            raise RuntimeError("card processor rejected the request")
        return f"charged {card}"

    bad, good = calls(("charge", {"card": "4111"})), calls(("charge", {"card": "5500"}))
    h, model, agent = harnessed(
        HarnessConfig(breaker_failures=100, loop_window=10, loop_threshold=10),
        [bad, bad, bad, bad, good, bad, bad, text("ok")],
        [charge],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert all("card processor rejected" in m for m in msgs[:3])
    for m in (msgs[3], msgs[5], msgs[6]):  # hard: never escapes, however often it is tried
        assert m.startswith("[harness:repeated_failure]")
        assert "failed 3 times in a row (tool_error)" in m
    assert "charged 5500" in msgs[4]  # other arguments are a different call
    assert [a["card"] for a in ran.of("charge")] == ["4111"] * 3 + ["5500"]
    assert report.refusals == {"repeated_failure": 3}
    assert not any(d.action == "allow_escape" for d in report.decisions)
    # met again with nothing new in between: the ladder makes the run
    # conclude, and this model does
    assert [c["tool_choice"].mode if c["tool_choice"] else None for c in model.calls] == [None] * 7 + ["none"]
    assert any("refused again (repeated_failure)" in h for h in hint_texts(model.calls[7]))
    assert report.terminal_state.value == "completed"


async def test_loop_hint_at_the_fourth_call_of_one_tool_once():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": q})) for q in "abcde"] + [text("done")],
        [t["search"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert len(ran) == 5
    assert ["you have called search" in m for m in msgs] == [False, False, False, True, False]
    assert "called search 4 times in your last 4 calls" in msgs[3]
    # the hint is outside the fenced data
    assert msgs[3].index("</tool-output") < msgs[3].index("you have called")
    assert report.refusals == {}


async def test_one_tool_with_new_arguments_and_nothing_new_is_hinted_then_stopped_by_the_drift_ladder():
    # README row 11: the loop detector constrains the same call; the same tool
    # with new arguments each time, nothing new back, is row 21's to stop
    ran = Ran()

    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return "No products match. Try another query."

    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": f"kettle model {i}"})) for i in range(12)] + [text("done")],
        [FunctionTool(search, permission=ALLOW)],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert "called search 4 times in your last 4 calls" in msgs[3]
    assert not any(d.hook == "repeat_call_gate" and d.action == "constrain" for d in report.decisions)
    choices = [c["tool_choice"] for c in model.calls]
    assert choices[:8] == [None] * 8 and choices[8] is not None and choices[8].mode == "none"
    assert [d.detail for d in report.decisions if d.action == "constrain"] == [
        "6 rounds without new information"]
    assert (report.terminal_state.value, report.reason) == ("incomplete", "stalled")
    assert len(ran) < 12


async def test_loop_hint_yields_to_dependency_down():
    ran = Ran()

    async def stock(sku: str) -> str:
        """Stock of a product.

        Args:
            sku (str): The product.
        """
        ran.append(("stock", {"sku": sku}))
        if sku in ("d", "e"):
            raise DependencyDown("warehouse API", "HTTP 503")
        return f"{sku}: 3 left"

    from agentscope_harness import Harness

    h = Harness(HarnessConfig(breaker_failures=10), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(stock, permission=ALLOW)]))
    _, model, agent = harnessed(
        None, [calls(("stock", {"sku": s})) for s in "abcde"] + [text("down")], toolkit, harness=h,
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    # the 4th call reached the loop threshold and failed with the dependency
    # down: the model reads the dependency-down sentinel, not the loop hint
    assert "[harness:dependency_down] warehouse API is unavailable. Do not retry" in msgs[3]
    assert msgs[4].startswith("[harness:dependency_down]")  # not called again this run
    assert [a["sku"] for a in ran.of("stock")] == ["a", "b", "c", "d"]
    assert not any("you have called" in m for m in msgs)
    # and the report does not claim a hint the model never read
    assert not any(
        d.hook == "repeat_call_gate" and d.action == "hint" for d in report.decisions
    )


async def test_stubborn_model_is_stopped_honestly():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools=SEARCH),
        [calls(("search", {"q": "x"}))], [t["search"]], repeat=True,
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) <= 8
    assert report.terminal_state.value == "incomplete"
    assert report.reason
    answer = final.get_text_content()
    assert "[harness:" not in answer and "<tool-output" not in answer
    assert len(ran) <= 3
    # the ladder: a hint, then tool_choice narrowed, then stopped
    assert any(c["tool_choice"] is not None and c["tool_choice"].mode == "none" for c in model.calls)
    assert len(h.table) == 0


async def test_stubborn_model_with_a_finish_tool_is_stopped_honestly():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(tools={**SEARCH, "submit": ToolPolicy(role="finish")}),
        [calls(("search", {"q": "x"}))], [t["search"], t["submit"]], repeat=True,
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) <= 8
    assert report.terminal_state.value == "incomplete"
    assert "[harness:" not in final.get_text_content()
    assert any(c["tool_choice"] is not None and c["tool_choice"].mode == "submit" for c in model.calls)
    assert ran.of("submit") == []

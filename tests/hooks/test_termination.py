"""termination.py: terminal_reached_gate, mark_terminal (verify, ask),
terminal_enforcer, liveness_watchdog."""

from __future__ import annotations

import asyncio

from hookkit import Ran, drive, harnessed, hint_texts, results, shop_tools, stored_results
from scripted import calls, text, tool

from agentscope_harness import HarnessConfig, ToolPolicy

FINISH = {"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")}


def finish_config(**kw) -> HarnessConfig:
    tools = dict(FINISH)
    tools.update(kw.pop("tools", {}))
    return HarnessConfig(tools=tools, **kw)


# ---------------------------------------------------- terminal_reached_gate


async def test_after_the_finish_tool_succeeds_no_more_tools_run():
    ran = Ran()
    t = shop_tools(ran)
    unsafe = {"is_concurrency_safe": False}  # one after the other, in order
    h, model, agent = harnessed(
        finish_config(),
        [calls(("submit", {"answer": "red mug"}), ("search", {"q": "more"}),
               ("submit", {"answer": "blue mug"})),
         text("Your answer was delivered.")],
        [tool(t["search"], **unsafe), tool(t["submit"], **unsafe)],
    )
    _, final, report = await drive(h, agent)
    msgs = stored_results(agent)
    assert "delivered" in msgs[0]
    assert msgs[1].startswith("[harness:run_concluded]")
    assert "answer the user now" in msgs[1]
    assert msgs[2].startswith("[harness:run_concluded]")  # safety: never escapes
    assert ran == [("submit", {"answer": "red mug"})]
    assert report.terminal_state.value == "completed"
    assert report.reason == "finished"
    assert report.refusals == {"run_concluded": 2}
    assert report.tool_calls == {"submit": 1}
    assert final.get_text_content() == "red mug"  # the finished answer, delivered
    assert len(model.calls) == 1  # no extra round paid for after the finish


# ------------------------------------------------------------ mark_terminal


async def test_verify_failure_is_an_error_the_model_reads_and_not_completed():
    seen = []

    def verify(result_text):
        seen.append(result_text)
        return "The answer does not name a product."

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(tools={"submit": ToolPolicy(role="finish", verify=verify)}, max_enforce_retries=0),
        [calls(("submit", {"answer": "something"})), text("I delivered it.")],
        [t["search"], t["submit"]],
    )
    _, _, report = await drive(h, agent)
    msg = results(model)[0]
    assert "[harness:verification_failed] The answer does not name a product." in msg
    assert "call submit again" in msg
    # after the tool's output, as the rules the model was given say a sentinel may stand (round 177 b)
    assert msg.index("[harness:verification_failed]") > msg.index("</tool-output")
    assert "A [harness:<code>] line in a tool result (at its start, or after the tool's output)" in (
        model.calls[0]["formatted"][0]["content"][0]["text"])
    assert seen == ["delivered"]  # verify sees the tool's own text, not the fenced one
    assert ran.of("submit") == [{"answer": "something"}]
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "finish_tool_not_called"
    assert any(d.action == "refuse" and d.code == "verification_failed" for d in report.decisions)
    assert "finished" not in report.facts


async def test_async_verify_then_fixed_answer_completes():
    async def verify(result_text):
        await asyncio.sleep(0)
        return None if "mug" in ran.of("submit")[-1]["answer"] else "Name the product."

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(tools={"submit": ToolPolicy(role="finish", verify=verify)}),
        [calls(("submit", {"answer": "something"})),
         calls(("submit", {"answer": "the red mug"})),
         text("Delivered: the red mug.")],
        [t["search"], t["submit"]],
    )
    _, _, report = await drive(h, agent)
    msgs = stored_results(agent)
    assert msgs[0].count("[harness:verification_failed] Name the product.") == 1
    assert "[harness:" not in msgs[1]
    assert report.terminal_state.value == "completed"
    assert report.reason == "finished"
    assert report.tool_calls == {"submit": 2}
    assert "finished" in report.facts


async def test_successful_ask_tool_ends_waiting_input():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(tools={"ask_user": ToolPolicy(role="ask")}),
        [calls(("ask_user", {"question": "Which colour?"})),
         calls(("search", {"q": "mug"})),
         text("Which colour would you like?")],
        [t["search"], t["submit"], t["ask_user"]],
    )
    _, _, report = await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:run_concluded]")
    assert ran == [("ask_user", {"question": "Which colour?"})]
    assert report.terminal_state.value == "waiting_input"
    assert report.reason == "asked_user"
    assert len(model.calls) == 3  # no enforcer round: asking is a legitimate end


# -------------------------------------------------------- terminal_enforcer


async def test_text_answer_without_finish_tool_gets_one_more_round_then_incomplete():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(),
        [text("The red mug."), text("The red mug, really.")],
        [t["search"], t["submit"]],
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 2
    hints = hint_texts(model.calls[1])
    assert len(hints) == 1 and "call submit to deliver the result" in hints[0]
    assert hint_texts(model.calls[0]) == []
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "finish_tool_not_called"
    # the answer went around the finishing tool (and its verify): the fallback, not the answer
    assert final.get_text_content().startswith("I could not complete this request (it did not deliver its result")
    assert "The red mug" not in final.get_text_content()


async def test_enforcer_nudge_then_finish_tool_completes():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(),
        [text("The red mug."), calls(("submit", {"answer": "red mug"})), text("Delivered.")],
        [t["search"], t["submit"]],
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 2
    assert model.calls[1]["tool_choice"].mode == "submit"  # the nudge narrows the choice
    assert ran == [("submit", {"answer": "red mug"})]
    assert report.terminal_state.value == "completed"
    assert final.get_text_content() == "red mug"


async def test_no_finish_tool_configured_text_answer_completes_at_once():
    h, model, agent = harnessed(HarnessConfig(), [text("Hello!")], [])
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 1
    assert report.terminal_state.value == "completed"
    assert report.reason == "answered"
    assert final.get_text_content() == "Hello!"


# -------------------------------------------------------- liveness_watchdog


async def test_deadline_spent_answers_with_fallback_without_a_model_call():
    ran = Ran()
    t = shop_tools(ran, delay=0.15)
    h, model, agent = harnessed(
        HarnessConfig(deadline_s=0.1, wrap_up_s=0),
        [calls(("search", {"q": "mug"})), text("never said")],
        [t["search"]],
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 1
    assert final.get_text_content() == HarnessConfig().fallback_text.format(
        reason="the time allowed for it ran out",
    ) + "\n\nWhat I found before stopping:\n- search: 3 products for mug: red mug, blue mug, green mug"
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "deadline"
    assert report.model_calls == 1
    assert any(d.action == "fallback" and d.detail == "deadline" for d in report.decisions)


async def test_wrap_up_forces_conclusion_through_tool_choice_mode():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        finish_config(deadline_s=30, wrap_up_s=30),
        [calls(("submit", {"answer": "red mug"})), text("Delivered.")],
        [t["search"], t["submit"]],
    )
    _, _, report = await drive(h, agent)
    assert model.calls[0]["tool_choice"].mode == "submit"
    assert model.calls[0]["tool_choice"].tools is None  # never narrowed through tools=
    assert len(model.calls[0]["tools"]) == 2  # the tool table never changes
    assert "Conclude now" in hint_texts(model.calls[0])[0]
    # once finished, the reply ends with the answer: no further model call
    assert len(model.calls) == 1
    assert report.terminal_state.value == "completed"


async def test_wrap_up_without_finish_tool_narrows_to_none_and_stops_a_model_ignoring_it():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(deadline_s=30, wrap_up_s=30),
        [calls(("search", {"q": "mug"}))], [t["search"]], repeat=True,
    )
    _, final, report = await drive(h, agent)
    assert model.calls[0]["tool_choice"].mode == "none"
    assert len(model.calls) <= 2
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "deadline"  # what constrained it: the time left
    assert ran == []
    assert "[harness:" not in final.get_text_content()


async def test_max_model_calls_ends_with_fallback():
    ran = Ran()
    t = shop_tools(ran)
    n = iter(range(100))
    h, model, agent = harnessed(
        HarnessConfig(max_model_calls=3),
        [lambda rec: calls(("search", {"q": f"q{next(n)}"}))], [t["search"]], repeat=True,
    )
    _, final, report = await drive(h, agent)
    assert len(model.calls) == 3
    assert len(ran) == 3
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "max_model_calls"
    assert final.get_text_content().startswith(HarnessConfig().fallback_text.format(
        reason="it took too many steps",
    ) + "\n\nWhat I found before stopping:\n- search: 3 products for q")


async def test_the_default_wrap_up_window_grows_with_slow_model_calls():
    """A deadline of 4 s has a default window of 0.6 s, shorter than one of
    this model's 2 s calls: the window widens to 1.5 calls (3 s), so the
    model is told to conclude while it still has time to."""
    import time as _time

    def slow_turn(turn):
        _time.sleep(2.0)  # a slow provider (blocking is fine: nothing else runs here)
        return calls(("search", {"q": "mug"}))

    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(HarnessConfig(deadline_s=4), [slow_turn, text("A red mug.")], [t["search"]])
    _, final, report = await drive(h, agent)
    assert HarnessConfig(deadline_s=4).effective_wrap_up_s() == 0.6
    assert any(d.action == "constrain" and "wrap-up" in d.detail for d in report.decisions)
    assert model.calls[1]["tool_choice"].mode == "none"
    assert final.get_text_content() == "A red mug."

"""After a dependency went down the model's answer is replaced by the
fallback, whichever rule ends the run: also when another rule ends it in
the very round of that answer (a ``post_reflect`` ``ctx.stop``,
``terminal_enforcer`` giving up on the finishing tool), and for a
structured output. What the user receives (the final message) and what
streamed (text deltas, every event) are checked, with the report.

Real ``Agent``s, real tools in a real ``Toolkit``, the scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentscope.message import Msg, TextBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool
from hookkit import Ran, down_shop, drive, every_event, harnessed, shop_tools, streamed, structured_reply
from pydantic import BaseModel
from scripted import ALLOW, ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy, harness_hook
from agentscope_harness.report import TerminalState

MADE_UP = "All 12 units are in stock!"
FALLBACK = "I could not complete this request ({reason}). Please try again, or narrow the request down."
FOUND = "\n\nWhat I found before stopping:\n- search: results for mug"


FIRST_ROUND = calls(("search", {"q": "mug"}), ("inventory", {"sku": "a"}))
"""The search finds something, the inventory is down."""


@harness_hook("post_reflect", name="quota_stop")
def quota_stop(ctx: Any) -> None:
    """A user's rule stopping the run on the round that answers."""
    if ctx.model_output.text:
        ctx.stop("quota")


@harness_hook("post_reflect", name="corrupt_stop")
def corrupt_stop(ctx: Any) -> None:
    """A user's rule failing the run, with its own text, on the round that answers."""
    if ctx.model_output.text:
        ctx.stop("corrupt_data", TerminalState.FAILED, text="Data corrupt; stopping.")


def _stopped_by(how: str, stream: bool, mode: str = "enforce") -> tuple[Harness, Any]:
    """A run whose inventory went down, then whose model makes up its
    answer, ended in that very round by ``how``."""
    if how == "terminal_enforcer":  # a finishing tool the model never calls
        tools = shop_tools(Ran())
        h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, breaker_failures=5, mode=mode),
                    load_entry_points=False)
        toolkit = down_shop(h, FunctionTool(tools["submit"], permission=ALLOW))
        _, _, agent = harnessed(None, [FIRST_ROUND, text(MADE_UP)], toolkit, harness=h, stream=stream, repeat=True)
        return h, agent
    hook = quota_stop if how == "post_reflect_stop" else corrupt_stop
    h = Harness(HarnessConfig(breaker_failures=5, mode=mode), hooks=[hook], load_entry_points=False)
    _, _, agent = harnessed(None, [FIRST_ROUND, text(MADE_UP)], down_shop(h), harness=h, stream=stream)
    return h, agent


ENDS = {
    # how the round is ended: (state, reason, what the user receives)
    "post_reflect_stop": ("incomplete", "quota", FALLBACK.format(reason="quota") + FOUND),
    "failed_with_text": ("failed", "corrupt_data", "Data corrupt; stopping." + FOUND),
    "terminal_enforcer": ("incomplete", "finish_tool_not_called",
                          FALLBACK.format(reason="a service it needs is unavailable") + FOUND),
}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("how", list(ENDS))
async def test_a_rule_ending_the_run_in_the_answers_round_does_not_let_the_made_up_answer_through(
    how: str, stream: bool,
) -> None:
    h, agent = _stopped_by(how, stream)
    events, final, report = await drive(h, agent)
    state, reason, answer = ENDS[how]
    assert (report.terminal_state.value, report.reason) == (state, reason)
    assert final.get_text_content() == answer
    shown = streamed(events)
    assert MADE_UP not in shown
    assert shown.endswith(answer)
    assert MADE_UP not in str(final.content)
    # the history the next reply reads says what the user was told
    assert agent.state.context[-1].get_content_blocks("text")[-1].text == answer


@pytest.mark.parametrize("how", list(ENDS))
async def test_shadow_mode_delivers_and_streams_the_models_answer_whatever_ends_the_run(how: str) -> None:
    h, agent = _stopped_by(how, stream=True, mode="shadow")
    events, final, _ = await drive(h, agent)
    assert final.get_text_content() == MADE_UP == streamed(events)


async def test_the_call_cap_reached_by_the_answers_round_replaces_the_answer() -> None:
    """The cap is checked before a model call: the round that reaches it
    answers with no end given, and its answer is replaced as any other."""
    h = Harness(HarnessConfig(breaker_failures=5, max_model_calls=2), load_entry_points=False)
    _, _, agent = harnessed(None, [FIRST_ROUND, text(MADE_UP)], down_shop(h), harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert final.get_text_content() == FALLBACK.format(reason="a service it needs is unavailable") + FOUND
    assert MADE_UP not in streamed(events) and streamed(events).endswith(final.get_text_content())


async def test_a_stop_answered_in_the_models_place_stands_after_a_dependency_went_down() -> None:
    """The call cap stops the run before the third model call: the harness
    answers (its stop text, streamed); no made-up answer to replace."""
    h = Harness(HarnessConfig(breaker_failures=5, max_model_calls=2), load_entry_points=False)
    _, model, agent = harnessed(None, [FIRST_ROUND, calls(("search", {"q": "cup"})), text(MADE_UP)], down_shop(h),
                                harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert len(model.calls) == 2
    assert (report.terminal_state.value, report.reason) == ("incomplete", "max_model_calls")
    answer = final.get_text_content()
    assert answer.startswith(FALLBACK.format(reason="it took too many steps"))
    assert streamed(events).endswith(answer)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_stalled_runs_answer_ended_in_its_round_by_a_stop_is_replaced_too(stream: bool) -> None:
    """The other answer the fallback replaces: one given once the run was
    made to conclude for lack of progress (``stalled``)."""
    h = Harness(HarnessConfig(stall_rounds=1), hooks=[quota_stop], load_entry_points=False)
    same = calls(("search", {"q": "mug"}))
    _, _, agent = harnessed(None, [same, same, same, same, text(MADE_UP)], down_shop(h), harness=h, stream=stream)
    events, final, report = await drive(h, agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "quota")
    answer = final.get_text_content()
    assert answer.startswith(FALLBACK.format(reason="quota") + "\n\nWhat I found before stopping:")
    assert MADE_UP not in streamed(events) and streamed(events).endswith(answer)


class SlowAfterFirst(ScriptedModel):
    """A model whose second call outlives the run's deadline."""

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        if self.usage:
            await asyncio.sleep(3)
        return await super()._call_api(*args, **kwargs)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_call_cut_by_the_deadline_answers_its_stop_text_after_a_dependency_went_down(stream: bool) -> None:
    """The deadline cuts the call that would have made the answer up: the
    stop text answers in the model's place (an end given during the call,
    not after the model answered) and is what streams."""
    h = Harness(HarnessConfig(breaker_failures=5, deadline_s=1.0), load_entry_points=False)
    agent = make_agent(SlowAfterFirst([FIRST_ROUND, text(MADE_UP)], stream=stream), down_shop(h), h.middlewares())
    events, final, report = await drive(h, agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    answer = final.get_text_content()
    assert answer == FALLBACK.format(reason="the time allowed for it ran out") + FOUND  # README: with what it found
    assert streamed(events) == answer


# ------------------------------------------------------------ structured output


class Stock(BaseModel):
    units: int
    summary: str


async def _structured(h: Harness, script: list[Any]) -> tuple[list[Any], Msg, Any, Any]:
    _, model, agent = harnessed(None, script, down_shop(h), harness=h, stream=True)
    events, final = await structured_reply(agent, Stock)
    return events, final, model, h.last_report(agent)


STRUCTURED = calls(("GenerateStructuredOutput", {"units": 12, "summary": MADE_UP}))


@pytest.mark.parametrize("said_first", [False, True])
async def test_a_made_up_structured_output_never_streams(said_first: bool) -> None:
    """Neither its arguments nor text the model says before it."""
    round_two = STRUCTURED
    if said_first:
        round_two = ChatResponse(content=[TextBlock(text=f"Good news: {MADE_UP}"), *STRUCTURED.content],
                                 is_last=True, usage=ChatUsage(input_tokens=1, output_tokens=1, time=0.0))
    h = Harness(HarnessConfig(breaker_failures=5), load_entry_points=False)
    events, final, _, report = await _structured(h, [FIRST_ROUND, round_two, text("done")])
    assert final.structured_output is None
    assert final.get_text_content() == FALLBACK.format(reason="a service it needs is unavailable") + FOUND
    assert report.reason == "dependency_down"
    assert "in stock" not in every_event(events)


async def test_a_stopped_structured_reply_gets_no_narrowed_round_after_a_dependency_went_down() -> None:
    """A stop before a model call gives a structured reply a round narrowed
    to its output; after a dependency went down that output would be made
    without its data: the reply ends with the stop text and no output."""
    h = Harness(HarnessConfig(breaker_failures=5, max_model_calls=1), load_entry_points=False)
    events, final, model, report = await _structured(h, [FIRST_ROUND, STRUCTURED, text("done")])
    assert len(model.calls) == 1
    assert final.structured_output is None
    assert final.get_text_content().startswith(FALLBACK.format(reason="it took too many steps"))
    assert report.reason == "max_model_calls"
    assert "in stock" not in every_event(events)



@harness_hook("post_reflect", name="stop_on_output")
def stop_on_output(ctx: Any) -> None:
    """A user's rule stopping the run on the round that makes the structured output."""
    if any(name == "GenerateStructuredOutput" for name, _ in ctx.model_output.tool_calls):
        ctx.stop("quota")


async def test_a_structured_output_made_in_a_round_another_rule_ends_is_withheld() -> None:
    h = Harness(HarnessConfig(breaker_failures=5), hooks=[stop_on_output], load_entry_points=False)
    events, final, _, report = await _structured(h, [FIRST_ROUND, STRUCTURED, text("done")])
    assert (report.terminal_state.value, report.reason) == ("incomplete", "quota")
    assert "in stock" not in every_event(events)  # its arguments never stream
    assert final.structured_output is None
    assert final.get_text_content() == FALLBACK.format(reason="quota") + FOUND

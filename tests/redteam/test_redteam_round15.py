"""Red team, round 15: the newest commits attacked from a user's side.

1. resume detection for a run the tool adapter opens alone (84d5466,
   acbc031): ``RunState.awaiting_human`` holds one call id, ``_answered``;
2. a structured output's call held to the end of its model call
   (``_OutputCalls``, 84d5466): order vs bare AgentScope, secrets, shadow;
3. a structured reply whose finishing tool completed (84d5466);
4. ``answer_made_up`` and ``outcome.replacement`` (1052d12).

Real ``Agent``s, real tools in real ``Toolkit``s, the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentscope.event import (
    ConfirmResult,
    CustomEvent,
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    ToolCallDeltaEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit
from hookkit import (
    Ran,
    client_tool,
    down_shop,
    drive,
    every_event,
    harnessed,
    refunding,
    searcher,
    shop_tools,
    structured_reply,
)
from pydantic import BaseModel
from scripted import ALLOW, ScriptedModel, calls, make_agent, text
from scripted import tool as allowed

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy, harness_hook

SECRET = "hunter2-super-secret-value-XYZ"
OUTPUT = "GenerateStructuredOutput"


class Stock(BaseModel):
    units: int
    summary: str


def _middlewares(h: Harness, adapters: str) -> list[Any]:
    mws = h.middlewares()
    return mws if adapters == "both" else mws[1:]


# ====================================================== 1. resume detection, the tool adapter alone


@pytest.mark.parametrize("order", ["refund_first", "client_first"])
@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_batch_parked_on_a_human_and_a_client_at_once_is_timed_again_after_both(
    adapters: str, order: str,
) -> None:
    """README: a run the tool adapter opens alone, "parked on a human or a
    client-executed call, it is timed again from the first call judged once
    that call is answered, as a reply is". One concurrent batch asks the
    human (refund) and hands a lookup to the client. The human approves at
    once; the client answers 1.3 s later (deadline_s=1.0). The model's next
    search must run, as it does with both adapters."""
    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    pair = [("refund", {"order_id": "A-1"}), ("client_lookup", {"order_id": "A-1"})]
    if order == "client_first":
        pair.reverse()
    model = ScriptedModel([calls(*pair), calls(("search", {"q": "after both"})), text("done")], model="m")
    agent = make_agent(model, Toolkit(tools=[client_tool(concurrent=True), refunding(ran), allowed(searcher(ran))]),
                       _middlewares(h, adapters), name="a")
    events = [e async for e in agent.reply_stream(UserMsg("user", "refund A-1"))]
    [ask] = [c for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls]
    [handed] = [c for e in events if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]
    approved = UserConfirmResultEvent(reply_id=agent.state.reply_id,
                                      confirm_results=[ConfirmResult(confirmed=True, tool_call=ask)])
    [_ async for _ in agent.reply_stream(approved)]
    assert ran.of("refund") == [{"order_id": "A-1"}]
    await asyncio.sleep(1.3)  # the client (the user's device) takes its time
    result = ToolResultBlock(id=handed.id, name="client_lookup", output="order A-1: paid",
                             state=ToolResultState.SUCCESS)
    said = [e async for e in agent.reply_stream(
        ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[result]), yield_final_msg=True,
    ) if isinstance(e, Msg)]
    assert said and said[-1].get_text_content() == "done"
    assert ran.of("search") == [{"q": "after both"}], model.calls[-1].last_result
    assert "deadline had passed" not in model.calls[-1].last_result


@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_denied_approval_after_the_deadline_times_the_run_again(adapters: str) -> None:
    """A human's denial is an answer too: the run is timed again from the
    next call judged. deadline_s=1.0; the human denies 1.3 s later; the
    model's next search runs and the refund never does."""
    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("search", {"q": "instead"})),
                           text("done")], model="m")
    agent = make_agent(model, Toolkit(tools=[refunding(ran), allowed(searcher(ran))]), _middlewares(h, adapters),
                       name="a")
    events = [e async for e in agent.reply_stream(UserMsg("user", "refund A-1"))]
    [ask] = [c for e in events if isinstance(e, RequireUserConfirmEvent) for c in e.tool_calls]
    await asyncio.sleep(1.3)
    denied = UserConfirmResultEvent(reply_id=agent.state.reply_id,
                                    confirm_results=[ConfirmResult(confirmed=False, tool_call=ask)])
    said = [e async for e in agent.reply_stream(denied, yield_final_msg=True) if isinstance(e, Msg)]
    assert said and said[-1].get_text_content() == "done"
    assert ran.of("refund") == [] and ran.of("search") == [{"q": "instead"}], model.calls[-1].last_result


# ====================================================== 2. the output call held to the end of its model call


def _turn(*blocks: Any) -> ChatResponse:
    return ChatResponse(content=list(blocks), is_last=True,
                        usage=ChatUsage(input_tokens=100, output_tokens=10, time=0.0))


def _output(units: int, summary: str) -> ToolCallBlock:
    return ToolCallBlock(id="out-1", name=OUTPUT, input=json.dumps({"units": units, "summary": summary}))


# re-cut by the redactor, or added by the harness (tests/reliability/test_transparency.py)
_SKIPPED = (CustomEvent, TextBlockDeltaEvent, ToolCallDeltaEvent, ToolResultTextDeltaEvent)


async def _shape(script: list[Any], h: Harness | None, stream: bool) -> tuple[list[str], Msg]:
    """A structured reply's event types (as the transparency suite compares
    them) and its final message, bare (``h`` None) or harnessed."""
    model = ScriptedModel(script, stream=stream, model="m")
    agent = make_agent(model, [searcher(Ran())], h.middlewares() if h is not None else [], name="a")
    events, final = await structured_reply(agent, Stock)
    return [type(e).__name__ for e in events if not isinstance(e, _SKIPPED)], final


_MIXED = {
    "text_then_output": lambda: [_turn(TextBlock(text="Here is the report."), _output(3, "three mugs"))],
    "output_then_text": lambda: [_turn(_output(3, "three mugs"), TextBlock(text="Here is the report."))],
}


@pytest.mark.parametrize(("case", "stream"), [
    ("text_then_output", False), ("output_then_text", False), ("output_then_text", True),
])
async def test_a_standing_structured_output_beside_text_keeps_agentscopes_event_order(case: str, stream: bool) -> None:
    """README Transparency: with a default HarnessConfig() and nothing
    triggering, an agent behaves as without the harness (the suite compares
    event types in order). A model answers with text and the structured
    output in one call; the output stands (no other call, nothing down).
    (Text streamed before the output call keeps its order: not listed.)"""
    bare, bare_final = await _shape(_MIXED[case](), None, stream)
    shown, final = await _shape(_MIXED[case](), Harness(HarnessConfig(), load_entry_points=False), stream)
    assert final.structured_output == bare_final.structured_output == {"units": 3, "summary": "three mugs"}
    assert shown == bare


@pytest.mark.parametrize("case", list(_MIXED))
async def test_shadow_mode_holds_no_output_call(case: str) -> None:
    """Shadow mode must change nothing in the stream: the same event order
    as bare AgentScope for a text-and-output model call."""
    bare, _ = await _shape(_MIXED[case](), None, False)
    shown, final = await _shape(_MIXED[case](), Harness(HarnessConfig(mode="shadow"), load_entry_points=False), False)
    assert shown == bare and final.structured_output == {"units": 3, "summary": "three mugs"}


@pytest.mark.parametrize("two_outputs", [False, True])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_secret_in_a_standing_structured_output_is_redacted_when_its_held_arguments_are_shown(
    stream: bool, two_outputs: bool,
) -> None:
    """The held arguments are shown at the model call's end (one output
    call, or two in one model call): through the same filter (secret
    redacted) as the delivered output."""
    h = Harness(HarnessConfig(secret_values=[SECRET]), load_entry_points=False)
    script = [_turn(TextBlock(text="Here."), _output(3, f"key {SECRET}")),
              _turn(_output(3, f"key {SECRET}"), _output(4, f"also {SECRET}"))]
    model = ScriptedModel(script[1:] if two_outputs else script[:1], stream=stream, model="m")
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    events, final = await structured_reply(agent, Stock)
    shown_args = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    assert "[redacted:secret_value]" in shown_args  # the arguments are shown: the output stands
    assert SECRET not in every_event(events)
    assert SECRET not in json.dumps(final.structured_output)


# ====================================================== 3. a structured reply whose finishing tool completed


class SlowAfterTwo(ScriptedModel):
    """Its third call (the first narrowed round) outlasts the run's deadline."""

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        if len(self.usage) >= 2:
            await asyncio.sleep(3)
        return await super()._call_api(*args, **kwargs)


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_deadline_in_the_narrowed_round_ends_with_the_finishing_tools_answer(mode: str) -> None:
    """README: a structured reply whose finishing tool completed gets its
    narrowed rounds; "without the output it ends with the finishing tool's
    answer, incomplete (structured_output_missing)"; the deadline ends it in
    shadow mode too. The narrowed round is cut by deadline_s=1.0: the user
    still gets what the finishing tool delivered, never a made-up output."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, deadline_s=1.0, mode=mode),
                load_entry_points=False)
    answer = "Three mugs match: red, blue and green."
    model = SlowAfterTwo([calls(("search", {"q": "mug"})), calls(("submit", {"answer": answer})),
                          calls((OUTPUT, {"units": 99, "summary": "never"}))], model="m")
    agent = make_agent(model, [tools["search"], FunctionTool(tools["submit"], permission=ALLOW)], h.middlewares(),
                       name="a")
    _, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    assert ran.of("submit") == [{"answer": answer}]
    assert final.structured_output is None and final.get_text_content() == answer
    assert (report.terminal_state.value, report.reason) == ("incomplete", "structured_output_missing")


async def test_an_honest_structured_reply_giving_its_output_beside_the_finishing_tool_ends_completed() -> None:
    """The finishing tool and the output in one batch: no narrowed round, no
    further model call; ``completed`` with the output (not
    ``structured_output_missing``)."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False)
    answer = "Three mugs match."
    _, model, agent = harnessed(None, [calls(("search", {"q": "mug"})),
                                       calls(("submit", {"answer": answer}), (OUTPUT, {"units": 3, "summary": answer})),
                                       text("never")],
                                [tools["search"], FunctionTool(tools["submit"], permission=ALLOW)], harness=h)
    _, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    assert len(model.calls) == 2 and ran.of("submit") == [{"answer": answer}]
    assert final.structured_output == {"units": 3, "summary": answer}
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")


# ====================================================== 4. answer_made_up and outcome.replacement


@harness_hook("post_reflect", name="leaky_quota")
def leaky_quota(ctx: Any) -> None:
    """A user's rule stopping the run on the answering round, quoting a key."""
    if ctx.model_output.text:
        ctx.stop("quota", TerminalState.FAILED, text=f"Quota reached for key {SECRET}.")


async def test_the_stop_text_replacing_a_made_up_answer_is_redacted() -> None:
    """README: when another rule ends the run in the made-up answer's round
    "the user receives the text that rule stopped the run with"; "Nothing
    leaks from a run": a secret (``secret_values``) never reaches the user.
    The inventory goes down; the model makes up an answer; a post_reflect
    hook stops the run with a text quoting the key."""
    h = Harness(HarnessConfig(breaker_failures=5, secret_values=[SECRET]), hooks=[leaky_quota],
                load_entry_points=False)
    _, _, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), text("All 12 units are in stock!")],
                            down_shop(h), harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert (report.terminal_state.value, report.reason) == ("failed", "quota")
    assert "in stock" not in final.get_text_content()
    assert final.get_text_content().startswith("Quota reached for key")
    assert SECRET not in final.get_text_content()
    assert SECRET not in every_event(events)

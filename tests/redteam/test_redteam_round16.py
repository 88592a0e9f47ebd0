"""Red team, round 16: commit 0f64ba7 attacked from a user's side.

1. ``_OutputCalls.held(item, everything)``: a structured output's call and
   what follows it in its model call held to the call's end, then shown in
   the model's order (order vs bare AgentScope, another tool's arguments, a
   provider failing mid-stream);
2. ``session_end`` passing a replaced answer through ``answer_filter``.

Real ``Agent``s, real tools, the scripted model of ``tests/scripted.py`` and
the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import (
    CustomEvent,
    ModelCallEndEvent,
    TextBlockDeltaEvent,
    TextBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallStartEvent,
    ToolResultTextDeltaEvent,
)
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit
from hookkit import Ran, drive, every_event, harnessed, inventory_down, searcher, streamed, structured_reply
from pydantic import BaseModel
from scripted import ALLOW, ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

SECRET = "hunter2-super-secret-value-XYZ"
OUTPUT = "GenerateStructuredOutput"
# re-cut by the redactor, or added by the harness (tests/reliability/test_transparency.py)
_SKIPPED = (CustomEvent, TextBlockDeltaEvent, ToolCallDeltaEvent, ToolResultTextDeltaEvent)


class Stock(BaseModel):
    units: int
    summary: str


def _turn(*blocks: Any) -> ChatResponse:
    return ChatResponse(content=list(blocks), is_last=True,
                        usage=ChatUsage(input_tokens=100, output_tokens=10, time=0.0))


def _output(units: int = 3, summary: str = "three mugs") -> ToolCallBlock:
    return ToolCallBlock(id="out-1", name=OUTPUT, input=json.dumps({"units": units, "summary": summary}))


async def submit(answer: str) -> str:
    """Deliver the final answer.

    Args:
        answer (str): The answer.
    """
    return "delivered"


def _shop(with_finish: bool) -> list[Any]:
    tools: list[Any] = [searcher(Ran())]
    if with_finish:
        tools.append(FunctionTool(submit, permission=ALLOW))
    return tools


async def _reply(script: list[Any], h: Harness | None, stream: bool, with_finish: bool = False):
    model = ScriptedModel(script, stream=stream, model="m")
    agent = make_agent(model, _shop(with_finish), h.middlewares() if h is not None else [], name="a")
    return await structured_reply(agent, Stock)


def _types(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events if not isinstance(e, _SKIPPED)]


# ====================================================== 1. the output call and what follows it


@pytest.mark.parametrize("stream", [False, True])
async def test_text_before_a_structured_output_call_in_a_run_with_a_finishing_tool_keeps_the_models_order(
    stream: bool,
) -> None:
    """README: "In the stream a structured output's call, and what follows
    it in its model call, is held to the end of that call and then shown in
    the model's order"; "In a run with a finishing tool ... text before a
    tool call is shown when the call starts". A structured reply in a run
    with a finishing tool (``submit``): the model writes a sentence, then
    the output call, in one model call; nothing triggers. The sentence must
    come before the output call, inside the model call, as bare AgentScope
    shows it."""
    script = [_turn(TextBlock(text="Here is the report."), _output())]
    bare, bare_final = await _reply(script, None, stream, with_finish=True)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False)
    events, final = await _reply([_turn(TextBlock(text="Here is the report."), _output())], h, stream,
                                 with_finish=True)
    assert final.structured_output == bare_final.structured_output == {"units": 3, "summary": "three mugs"}
    assert streamed(events) == "Here is the report."
    kinds = [type(e) for e in events]
    text_at = kinds.index(TextBlockStartEvent)
    assert text_at < kinds.index(ToolCallStartEvent) < kinds.index(ModelCallEndEvent)
    assert _types(events) == _types(bare)


@pytest.mark.parametrize("stream", [False, True])
async def test_another_tools_call_after_the_output_keeps_its_arguments_and_the_output_loses_its_own(
    stream: bool,
) -> None:
    """README: the output's arguments are shown "not in a round that also
    calls other tools"; only the output's are hidden. The model calls the
    output, then ``search``, in one model call (default config): the
    search's arguments are still streamed, the output's made-up-able ones
    are not, and the event types keep bare AgentScope's order."""
    def script() -> list[Any]:
        return [_turn(_output(), ToolCallBlock(id="s-1", name="search", input='{"q": "blue mug"}')),
                _turn(_output(4, "four mugs"))]

    bare, _ = await _reply(script(), None, stream)
    events, final = await _reply(script(), Harness(HarnessConfig(), load_entry_points=False), stream)
    starts = {e.tool_call_id: e.tool_call_name for e in events if isinstance(e, ToolCallStartEvent)}
    args = {starts[e.tool_call_id]: e.delta for e in events if isinstance(e, ToolCallDeltaEvent)
            and starts.get(e.tool_call_id) == "search"}
    first_model_call = events[:[type(e) for e in events].index(ModelCallEndEvent)]
    shown_output_args = [e for e in first_model_call if isinstance(e, ToolCallDeltaEvent)
                         and starts.get(e.tool_call_id) == OUTPUT]
    assert json.loads(args["search"]) == {"q": "blue mug"}
    assert shown_output_args == []
    assert _types(events) == _types(bare)
    assert final.structured_output is not None


class FailsAfterTheOutput(ScriptedModel):
    """A provider that streams the output call's start and arguments, then a
    sentence, then fails (a connection reset mid-stream)."""

    async def _stream(self, res: ChatResponse) -> Any:
        for block in res.content:
            yield ChatResponse(content=[block], is_last=False)
        raise ConnectionResetError("provider stream reset")


async def test_a_provider_failing_after_the_output_started_shows_no_made_up_arguments() -> None:
    """README: a provider's failure after its retries with
    ``model_error_text`` configured: ``failed`` (``model_error``) with that
    text. The stream was holding the output's call and the sentence after
    it: what it shows must not include the output's arguments (never
    delivered) nor the sentence's claim as an answer, and the user gets the
    error text."""
    h = Harness(HarnessConfig(model_error_text="The model is unavailable."), load_entry_points=False)
    model = FailsAfterTheOutput([_turn(_output(12, "all 12 in stock"), TextBlock(text="All 12 in stock!"))],
                                stream=True, model="m")
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    events, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    assert "all 12 in stock" not in every_event(events)
    assert "All 12 in stock!" not in streamed(events)
    assert final.get_text_content() == "The model is unavailable."
    assert final.structured_output is None
    assert (report.terminal_state.value, report.reason) == ("failed", "model_error")


# ====================================================== 2. a replaced answer through the answer's filter


async def test_the_found_list_after_a_made_up_answer_keeps_its_redaction_labels_intact() -> None:
    """README: a dependency down ends with "fallback_text ... plus a short,
    redacted list of what the run found"; the replacement now takes the
    answer's filter a second time. A search result carrying a secret is
    already redacted in the found list: the label must come through whole
    (not re-redacted or cut), the secret never."""
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): What to look for.
        """
        return f"results for {q}: supplier key {SECRET}"

    h = Harness(HarnessConfig(breaker_failures=5, secret_values=[SECRET], pii={"email": "mask"}),
                load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(search, permission=ALLOW),
                                         FunctionTool(inventory_down, name="inventory", permission=ALLOW)]))
    _, _, agent = harnessed(None, [calls(("search", {"q": "mug"})), calls(("inventory", {"sku": "a"})),
                                   text("All 12 units are in stock!")],
                            toolkit, harness=h, stream=True)
    events, final, report = await drive(h, agent)
    said = final.get_text_content()
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert "in stock" not in said
    assert "- search: " in said and "[redacted:secret_value]" in said
    assert SECRET not in said and SECRET not in every_event(events)


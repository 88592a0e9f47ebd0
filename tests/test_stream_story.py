"""What a streaming UI shows tells the same story as the final answer
(red team, pass 3): an audited answer is streamed once; a correction follows
the claim; in a finishing-tool run a text answer that stands is streamed, in
order with the tool calls of its round; a replaced one never is."""

from __future__ import annotations

import copy
import json
import os
import sys

from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage
from scripted import ScriptedModel, calls, make_agent, run, text

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "hooks"))
from hookkit import Ran, down_shop, drive, harnessed, shop_tools, streamed

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

SECRET = "hunter2-super-secret-value-XYZ"
FINISH = HarnessConfig(tools={"submit": ToolPolicy(role="finish")})


async def test_an_audited_answer_is_streamed_once() -> None:
    h, _, agent = harnessed(HarnessConfig(secret_values=[SECRET], pii={"email": "mask"}),
                            [text(f"Your key is {SECRET}; mail bob.smith@example.com.")], [], stream=True)
    events, final, _ = await drive(h, agent)
    assert SECRET not in streamed(events)
    assert streamed(events) == final.get_text_content()


async def test_a_corrected_claim_is_followed_by_its_correction() -> None:
    ran = Ran()
    cfg = HarnessConfig(tools={"cancel_order": ToolPolicy(claims=[r"\bcancell?ed\b"])})
    h, _, agent = harnessed(cfg, [text("Your order has been cancelled.")], [shop_tools(ran)["cancel_order"]],
                            stream=True)
    events, final, report = await drive(h, agent)
    shown = streamed(events)
    assert shown.startswith("Your order has been cancelled.")
    assert shown.endswith(final.get_text_content()) and "did not succeed" in shown
    assert shown.count("did not succeed") == 1 and report.unsupported_claims == ["cancel_order"]


async def test_a_text_answer_on_the_last_round_is_streamed() -> None:
    ran = Ran()
    tools = shop_tools(ran)
    h, _, agent = harnessed(FINISH, [text("The answer is 42.")], [tools["submit"], tools["search"]],
                            stream=True, max_iters=1)
    events, final, _ = await drive(h, agent)
    assert final.get_text_content() == "The answer is 42." == streamed(events)


async def test_a_replaced_text_answer_is_never_streamed() -> None:
    ran = Ran()
    tools = shop_tools(ran)
    h, _, agent = harnessed(FINISH, [text("first"), calls(("submit", {"answer": "red mug"}))],
                            [tools["submit"]], stream=True)
    events, final, _ = await drive(h, agent)
    assert "first" not in streamed(events)
    assert final.get_text_content() == "red mug"


async def test_text_of_a_tool_round_streams_before_its_calls() -> None:
    ran = Ran()
    tools = shop_tools(ran)
    mixed = ChatResponse(content=[TextBlock(text="Let me search for mugs first."),
                                  ToolCallBlock(id="c1", name="search", input=json.dumps({"q": "mug"}))],
                         is_last=True, usage=ChatUsage(input_tokens=1, output_tokens=1, time=0.0))
    h, _, agent = harnessed(FINISH, [mixed, calls(("submit", {"answer": "red mug"}))],
                            [tools["submit"], tools["search"]], stream=True)
    events, _, _ = await drive(h, agent)
    kinds = [type(e).__name__ for e in events]
    first_text = next(i for i, k in enumerate(kinds) if k.startswith("TextBlock"))
    first_call = next(i for i, k in enumerate(kinds) if k.startswith("ToolCall"))
    assert first_text < first_call
    assert "Let me search for mugs first." in streamed(events)


async def test_a_copy_of_a_counted_model_is_a_model_of_its_own() -> None:
    """Attempts are counted by wrapping the model's class, not the instance:
    a copy made after a harnessed run calls its own API."""
    model = ScriptedModel([text("original answer")])
    h = Harness(HarnessConfig(), load_entry_points=False)
    await run(make_agent(model, [], middlewares=h.middlewares()), "hi")
    clone = copy.deepcopy(model)
    clone.script = [text("clone answer")]
    _, final = await run(make_agent(clone, []), "hi")
    assert final.get_text_content() == "clone answer"


async def test_tool_result_deltas_are_redacted_even_when_fenced_unfiltered() -> None:
    """Red team (review pass): a fenced result is not proof of redaction;
    with ``content_filter`` disabled the stream still never shows a secret."""

    async def leak(q: str) -> str:
        """Look something up.

        Args:
            q (str): The query.
        """
        return f"config: aws=AKIAIOSFODNN7EXAMPLE pw={SECRET}"

    cfg = HarnessConfig(secret_values=[SECRET], disabled_hooks={"content_filter"})
    h, _, agent = harnessed(cfg, [calls(("leak", {"q": "x"})), text("done")], [leak])
    events, _, _ = await drive(h, agent)
    shown = json.dumps([e.model_dump(mode="json") for e in events])
    assert "tool-output" in shown  # the result was fenced
    assert SECRET not in shown and "AKIAIOSFODNN7EXAMPLE" not in shown


async def test_after_a_dependency_went_down_a_made_up_answer_is_never_streamed() -> None:
    """Red team: the streamed answer of a run whose dependency went down is
    always replaced by the fallback, yet the user watched "All 12 units are
    in stock!" stream before the fallback followed it. Text of a round that
    calls tools still streams (it is not the answer)."""
    h = Harness(HarnessConfig(breaker_failures=5), load_entry_points=False)
    preamble = ChatResponse(content=[TextBlock(text="Let me search instead."),
                                     ToolCallBlock(id="c2", name="search", input=json.dumps({"q": "mug"}))],
                            is_last=True, usage=ChatUsage(input_tokens=1, output_tokens=1, time=0.0))
    _, _, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), preamble, text("All 12 units are in stock!")],
                            down_shop(h), harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    shown = streamed(events)
    assert "in stock" not in shown and "Let me search instead." in shown
    assert shown.endswith(final.get_text_content()) and shown.count("I could not complete") == 1

"""Red team, round 12: the five latest fixes attacked from a user's side.

1. scrubbed reasons, failed compressions, the watchdog stopping FAILED runs
   (caf8a70); 2. a tool-only lead binds its run (ce34ba2); 3. re-nesting a
   resumed sub-agent (067239d); 4. the lowest request cap of every enforcing
   run (c37aef3); 5. held-back text once the fallback will replace the
   answer (e5fe1eb).

Real ``Agent``s, real tools, the scripted model of ``tests/scripted.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "realclient"))

from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit
from hookkit import (
    Ran,
    down_shop,
    drive,
    every_event,
    harnessed,
    inventory_down,
    refunding,
    shop_tools,
    streamed,
    structured_reply,
)
from scripted import ALLOW, ScriptedModel, calls, delegating_tool, make_agent, text
from test_redteam_round11 import CompressingTimeoutModel, _page_tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.report import TerminalState

# ====================================================== 5. held-back text


async def test_a_post_reflect_stop_after_a_dependency_went_down_does_not_stream_the_made_up_answer() -> None:
    """A user's post_reflect hook that stops the run (ctx.stop) on the round
    whose text answer was held back: answer_is_replaced is read again after
    post_reflect, now False (the run has a terminal), so the held text goes
    out. Whatever the user then receives, the made-up answer must not be the
    stream while the final answer says otherwise."""
    from agentscope_harness import harness_hook

    @harness_hook("post_reflect", name="quota_stop")
    def quota_stop(ctx: Any) -> None:
        if ctx.model_output.text:
            ctx.stop("quota")

    h = Harness(HarnessConfig(breaker_failures=5), hooks=[quota_stop], load_entry_points=False)
    _, _, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), text("All 12 units are in stock!")],
                            down_shop(h), harness=h, stream=True)
    events, final, report = await drive(h, agent)
    shown = streamed(events)
    print(report.terminal_state, report.reason, repr(final.get_text_content()), repr(shown))
    assert "in stock" not in final.get_text_content()
    assert "in stock" not in shown


@pytest.mark.parametrize("stream", [True])
async def test_thinking_then_text_after_dependency_down(stream: bool) -> None:
    """A round with a thinking block then a made-up text answer after the
    dependency went down: the text never streams, the fallback follows."""
    from agentscope.message import ThinkingBlock

    h = Harness(HarnessConfig(breaker_failures=5), load_entry_points=False)
    made_up = ChatResponse(content=[ThinkingBlock(thinking="I'll just guess."),
                                    TextBlock(text="All 12 units are in stock!")],
                           is_last=True, usage=ChatUsage(input_tokens=1, output_tokens=1, time=0.0))
    _, _, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), made_up],
                            down_shop(h), harness=h, stream=stream)
    events, final, report = await drive(h, agent)
    shown = streamed(events)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert "in stock" not in shown and "in stock" not in final.get_text_content()
    assert shown.endswith(final.get_text_content())


async def test_dependency_down_in_the_same_round_as_text_and_a_parallel_call() -> None:
    """Round 1: text + two calls (the dependency goes down in the batch);
    round 2: a made-up answer. Round 1's text streams (it precedes calls);
    round 2's never."""
    h = Harness(HarnessConfig(breaker_failures=5), load_entry_points=False)
    r1 = ChatResponse(content=[TextBlock(text="Checking stock and searching."),
                               ToolCallBlock(id="c1", name="inventory", input=json.dumps({"sku": "a"})),
                               ToolCallBlock(id="c2", name="search", input=json.dumps({"q": "mug"}))],
                      is_last=True, usage=ChatUsage(input_tokens=1, output_tokens=1, time=0.0))
    _, _, agent = harnessed(None, [r1, text("All 12 units are in stock!")], down_shop(h), harness=h,
                            stream=True)
    events, final, report = await drive(h, agent)
    shown = streamed(events)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert "Checking stock and searching." in shown and "in stock!" not in shown
    assert shown.endswith(final.get_text_content())


async def test_shadow_mode_streams_the_answer_after_a_dependency_went_down() -> None:
    h = Harness(HarnessConfig(breaker_failures=5, mode="shadow"), load_entry_points=False)
    _, _, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), text("All 12 units are in stock!")],
                            down_shop(h), harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert streamed(events) == "All 12 units are in stock!" == final.get_text_content()


async def test_a_finishing_tool_run_whose_dependency_went_down_and_answers_in_text() -> None:
    """Built-ins only: a run with a required finishing tool, whose inventory
    dependency went down, answers in text until terminal_enforcer gives up.
    The made-up answer must neither stream nor be delivered (README: a run in
    which a dependency went down ... its user gets the fallback answer with
    what the run found, not the model's text)."""
    ran = Ran()
    tools = shop_tools(ran)
    cfg = HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, breaker_failures=5)
    h = Harness(cfg, load_entry_points=False)
    tk = h.instrument(Toolkit(tools=[FunctionTool(inventory_down, name="inventory", permission=ALLOW),
                                     FunctionTool(tools["submit"], permission=ALLOW)]))
    _, model, agent = harnessed(None, [calls(("inventory", {"sku": "a"})), text("All 12 units are in stock!")],
                                tk, harness=h, stream=True, repeat=True)
    events, final, report = await drive(h, agent)
    shown = streamed(events)
    print(report.terminal_state, report.reason, repr(final.get_text_content()), repr(shown))
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert "in stock" not in shown
    assert "in stock" not in final.get_text_content()


# ====================================================== 1. scrubbed reason


SECRET = "hunter2-super-secret-value-XYZ"


def _failing_acting(message: str) -> Any:
    from agentscope.middleware import MiddlewareBase

    class Boom(MiddlewareBase):
        async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            n = 0
            async for item in next_handler(**input_kwargs):
                n += 1
                if n == 3:
                    raise RuntimeError(message)
                yield item

    return Boom()


async def _fail_with(message: str, **cfg: Any) -> tuple[Any, BaseException | None]:
    h = Harness(HarnessConfig(secret_values=[SECRET], **cfg), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "x"})), text("done")])
    from scripted import search
    agent = make_agent(model, [search], [*h.middlewares(), _failing_acting(message)])
    exc = None
    try:
        await drive(h, agent)
    except Exception as e:
        exc = e
    return h.last_report(agent), exc


async def test_a_failure_reason_quoting_a_secret_is_scrubbed() -> None:
    report, exc = await _fail_with(f"upstream said: key={SECRET}")
    assert exc is not None and report.terminal_state is TerminalState.FAILED
    print(report.reason)
    assert SECRET not in report.reason


@pytest.mark.parametrize("record_raw", [False, True])
async def test_a_secret_cut_by_the_reasons_300_character_bound_is_scrubbed(record_raw: bool) -> None:
    """The reason was cut to 300 characters *before* it was scrubbed: a
    secret straddling the cut was no longer the exact configured value."""
    prefix = "error: RuntimeError: "
    pad = "x" * (300 - len(prefix) - 20)
    report, exc = await _fail_with(pad + SECRET + " trailing", record_raw=record_raw)
    assert exc is not None and report.terminal_state is TerminalState.FAILED
    assert SECRET[:20] not in report.reason


async def test_a_failure_reason_quoting_an_email_is_scrubbed_unless_record_raw() -> None:
    report, _ = await _fail_with("bad row for bob.smith@example.com")
    assert "bob.smith@example.com" not in report.reason
    report, _ = await _fail_with("bad row for bob.smith@example.com", record_raw=True)
    assert "bob.smith@example.com" in report.reason  # documented: record_raw keeps PII, not secrets


# ====================================================== 1. failed compressions




async def _compressing_run(cfg: HarnessConfig, error: BaseException, stream: bool = False) -> Any:
    from agentscope.agent import ContextConfig

    model = CompressingTimeoutModel([calls(("page", {"url": "http://x"})), text("Here is the page."), text("again")],
                                 error, model="gpt-test", stream=stream)
    model.context_size = 4000
    h = Harness(cfg, load_entry_points=False)
    agent = make_agent(model, [_page_tool()], h.middlewares(),
                       context_config=ContextConfig(compression_fallback_to_truncation=False))
    exc = None
    events: list = []
    final = None
    try:
        events, final, _ = await drive(h, agent)
    except Exception as e:
        exc = e
    return model, h.last_report(agent), final, exc, events


async def test_a_failed_compression_quoting_a_secret_raises_and_reports_scrubbed() -> None:
    model, report, final, exc, _ = await _compressing_run(
        HarnessConfig(secret_values=[SECRET]), RuntimeError(f"provider 500, key {SECRET}"))
    assert isinstance(exc, RuntimeError) and model.compressions >= 1
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert SECRET not in json.dumps(report.model_dump(mode="json"), default=str)


async def test_a_failed_compression_streams_model_error_text_once() -> None:
    model, report, final, exc, events = await _compressing_run(
        HarnessConfig(model_error_text="The provider failed; try again."), RuntimeError("500"), stream=True)
    assert exc is None and (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert len(model.calls) == 1
    shown = streamed(events)
    assert shown.count("The provider failed; try again.") == 1 and shown.endswith(final.get_text_content())


async def test_shadow_mode_a_failed_compression_is_raised_or_answered_like_a_failed_model_call() -> None:
    """Shadow mode refuses nothing. Without the harness AgentScope (its
    truncation fallback off) raises the compression's error; a shadow
    Harness meeting a failed *reasoning* call answers model_error_text. A
    failed compression does neither: the run goes on to another model call."""
    model, report, final, exc, _ = await _compressing_run(
        HarnessConfig(mode="shadow", model_error_text="The provider failed; try again."), RuntimeError("500"))
    answered = final.get_text_content() if final is not None else ""
    assert exc is not None or answered.startswith("The provider failed; try again.")
    assert len(model.calls) == 1


async def test_shadow_mode_a_failed_reasoning_call_answers_model_error_text() -> None:
    class Failing(ScriptedModel):
        async def _call_api(self, *a: Any, **kw: Any) -> Any:
            raise RuntimeError("500")

    h = Harness(HarnessConfig(mode="shadow", model_error_text="The provider failed; try again."),
                load_entry_points=False)
    agent = make_agent(Failing([text("never")]), [], h.middlewares())
    _, final, report = await drive(h, agent)
    assert final.get_text_content().startswith("The provider failed; try again.")
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")


# ====================================================== 2. tool-only leads bind their run


def _child(ran: Ran, script: list[Any], name: str, tools: list[Any] | None = None,
           child_h: Harness | None = None) -> tuple[Harness, Any]:
    from hookkit import searcher
    child_h = child_h or Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(ScriptedModel(script, model="c"), tools if tools is not None else [searcher(ran)],
                       child_h.middlewares(), name=name)
    return child_h, child


async def test_a_tool_only_leads_cap_binds_two_sub_agents_run_by_parallel_calls() -> None:
    """Two delegate calls in one batch (each its own tool task): both
    sub-agents are nested in the tool-only lead; its max_tool_calls=4
    counts both delegates and every search of both children."""
    ran = Ran()
    _, c1 = _child(ran, [*[calls(("search", {"q": f"a{i}"})) for i in range(4)], text("c1")], "c1")
    _, c2 = _child(ran, [*[calls(("search", {"q": f"b{i}"})) for i in range(4)], text("c2")], "c2")
    h = Harness(HarnessConfig(max_tool_calls=4), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("d1", {"task": "x"}), ("d2", {"task": "y"})), text("lead done")],
                                    model="l"),
                      [delegating_tool(c1, "d1"), delegating_tool(c2, "d2")], h.middlewares()[1:], name="lead")
    await drive(h, lead)
    assert len(ran) <= 2, ran


async def test_a_tool_only_leads_deadline_cuts_a_sub_agents_slow_tool() -> None:
    from hookkit import crawling
    ran = Ran()
    _, child = _child(ran, [calls(("crawl", {"url": "u"})), text("child done")], "child",
                      tools=[crawling(ran, 4.0)])
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegating_tool(child)], h.middlewares()[1:], name="lead")
    t0 = asyncio.get_running_loop().time()
    await drive(h, lead)
    assert asyncio.get_running_loop().time() - t0 < 3.0
    assert ("crawl:end", {"url": "u"}) not in ran


# ====================================================== 4. request caps across Harnesses

from agentscope_harness import CostPolicy

BIG = "lorem ipsum " * 2000  # ~6,000 tokens once in a context


def _big_search(ran: Ran) -> Any:
    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return BIG

    return search


async def test_a_tool_only_leads_request_cap_binds_a_sub_agent_under_another_harness() -> None:
    ran = Ran()
    child_model = ScriptedModel([calls(("search", {"q": "x"})), text("child done")], model="child-m")
    child_h = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(child_model, [_big_search(ran)], child_h.middlewares(), name="researcher")
    h = Harness(HarnessConfig(cost=CostPolicy(max_request_input_tokens=3000)), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m"),
                      [delegating_tool(child)], h.middlewares()[1:], name="lead")
    await drive(h, lead)
    assert len(child_model.calls) == 1  # the request carrying the big result is not sent


@pytest.mark.parametrize("lead_cap", [3000, None])
async def test_the_sub_agents_own_lower_cap_and_the_leads_both_hold(lead_cap: Any) -> None:
    """Lowest of every enforcing run: the child's own cap (3000) binds even
    under an uncapped lead, and the lead's lower one under a higher own."""
    ran = Ran()
    child_model = ScriptedModel([calls(("search", {"q": "x"})), text("child done")], model="child-m")
    own = 3000 if lead_cap is None else 50_000
    child_h = Harness(HarnessConfig(cost=CostPolicy(max_request_input_tokens=own)), load_entry_points=False)
    child = make_agent(child_model, [_big_search(ran)], child_h.middlewares(), name="researcher")
    cost = CostPolicy(max_request_input_tokens=lead_cap) if lead_cap else None
    h = Harness(HarnessConfig(cost=cost), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m"),
                      [delegating_tool(child)], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(child_model.calls) == 1


async def test_a_sub_agent_parked_under_an_uncapped_lead_and_resumed_under_a_capped_one_is_capped() -> None:
    """Claims 3 + 4: parked during lead A's reply (no cap), resumed from
    lead B's tool (another Harness, max_request_input_tokens=3000): re-nested
    in B's live run, its request carrying the approved tool's big result
    must not be sent."""
    from scripted import parking_tools

    ran = Ran()

    child_h = Harness(HarnessConfig(), load_entry_points=False)
    child_model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("child: refunded")], model="c")
    child = make_agent(child_model, [refunding(ran, BIG)], child_h.middlewares(), name="child")
    delegate, resume, asks = parking_tools(child)
    ha = Harness(HarnessConfig(), load_entry_points=False)
    lead_a = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked")], model="a"),
                        [delegate], ha.middlewares(), name="lead_a")
    await drive(ha, lead_a)
    assert len(asks) == 1 and ran == []
    hb = Harness(HarnessConfig(cost=CostPolicy(max_request_input_tokens=3000)), load_entry_points=False)
    lead_b = make_agent(ScriptedModel([calls(("resume", {"task": "go"})), text("lead b done")], model="b"),
                        [resume], hb.middlewares(), name="lead_b")
    await drive(hb, lead_b)
    assert ran.of("refund") == [{"order_id": "A-1"}]
    assert len(child_model.calls) == 1, len(child_model.calls)


# ====================================================== 1. the watchdog stops FAILED runs


def _failing_hook() -> Any:
    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", name="fatal_result")
    def fatal_result(ctx: Any) -> None:
        ctx.stop("corrupt_data", TerminalState.FAILED, text="Data corrupt; stopping.")

    return fatal_result


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
async def test_a_hook_stopping_failed_after_a_tool_ends_at_the_next_step(mode: str) -> None:
    """Enforce: the next round answers the stop text without a model call,
    report failed/corrupt_data. Shadow: the model answers (refuse nothing)."""
    from scripted import search
    h = Harness(HarnessConfig(mode=mode), hooks=[_failing_hook()], load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "x"})), text("model answer")])
    agent = make_agent(model, [search], h.middlewares())
    _, final, report = await drive(h, agent)
    if mode == "enforce":
        assert len(model.calls) == 1
        assert final.get_text_content().startswith("Data corrupt; stopping.")
        assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "corrupt_data")
    else:
        assert len(model.calls) == 2 and final.get_text_content() == "model answer"


# ====================================================== 5. structured output after a dependency went down


async def test_a_structured_reply_after_a_dependency_went_down_never_streams_the_made_up_output() -> None:
    from pydantic import BaseModel

    class Stock(BaseModel):
        units: int
        summary: str

    h = Harness(HarnessConfig(), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(inventory_down, name="inventory", permission=ALLOW)]))
    _, _, agent = harnessed(None, [
        calls(("inventory", {"sku": "a"})),
        calls(("GenerateStructuredOutput", {"units": 12, "summary": "All 12 units are in stock!"})),
        text("done"),
    ], toolkit, harness=h, stream=True)
    events, final = await structured_reply(agent, Stock)
    assert final is not None and final.structured_output is None
    assert h.last_report(agent).reason == "dependency_down"
    assert "in stock" not in every_event(events)


# ====================================================== 3. re-nesting on resume


@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_sub_agent_resumed_in_the_leads_next_reply_reads_that_replys_deadline(adapters: str) -> None:
    """Parked in lead reply 1 (deadline_s=1.0), the human answers 1.3 s
    later; the lead's reply 2 (a fresh second) resumes it. Re-nested in
    reply 2, the approved refund is inside reply 2's deadline and runs."""
    from scripted import parking_tools

    ran = Ran()

    child_h = Harness(HarnessConfig(), load_entry_points=False)
    mws = child_h.middlewares()
    child_model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("child: refunded")], model="c")
    child = make_agent(child_model, [refunding(ran)], mws[1:] if adapters == "tool_only" else mws,
                       name="child")
    delegate, resume, asks = parking_tools(child)
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked"),
                                     calls(("resume", {"task": "go"})), text("lead done")], model="l"),
                      [delegate, resume], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(asks) == 1
    await asyncio.sleep(1.3)
    _, final, report = await drive(h, lead)
    assert ran.of("refund") == [{"order_id": "A-1"}], (ran, report.reason)


async def test_a_shadow_sub_agents_own_cap_only_records_under_an_uncapped_enforcing_lead() -> None:
    ran = Ran()
    child_model = ScriptedModel([calls(("search", {"q": "x"})), text("child done")], model="child-m")
    child_h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(max_request_input_tokens=3000)),
                      load_entry_points=False)
    child = make_agent(child_model, [_big_search(ran)], child_h.middlewares(), name="researcher")
    h = Harness(HarnessConfig(), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m"),
                      [delegating_tool(child)], h.middlewares(), name="lead")
    _, final, report = await drive(h, lead)
    assert len(child_model.calls) == 2 and final.get_text_content() == "lead done"
    [c] = report.children
    assert any(d.enforced is False for d in c.decisions), c.decisions



_CYCLE_SCRIPT = 'import asyncio, sys\nsys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/hooks")\nfrom hookkit import Ran\nfrom scripted import ScriptedModel, calls, text, make_agent, parking_tools\nfrom agentscope.tool import FunctionTool\nfrom agentscope.message import UserMsg, Msg\nfrom agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent\nfrom agentscope_harness import Harness, HarnessConfig\n\nasync def main():\n    ran = Ran()\n    lead_asks = []\n    holder = {}\n\n    async def refund(order_id: str) -> str:\n        """Refund an order.\n\n        Args:\n            order_id (str): The order.\n        """\n        ran.append(("refund", {"order_id": order_id}))\n        return f"refunded {order_id}"\n\n    async def resume_lead(task: str) -> str:\n        """Resume the lead.\n\n        Args:\n            task (str): What.\n        """\n        ask = lead_asks[-1]\n        answers = [ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]\n        out = []\n        async for item in holder["lead"].reply_stream(UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=answers), yield_final_msg=True):\n            if isinstance(item, Msg):\n                out.append(item.get_text_content() or "")\n        return " ".join(out) or "lead resumed"\n\n    ch = Harness(HarnessConfig(), load_entry_points=False)\n    cm = ScriptedModel([calls(("refund", {"order_id": "C-1"})), calls(("resume_lead", {"task": "go"})), text("child done")], model="c")\n    child = make_agent(cm, [FunctionTool(refund), resume_lead], ch.middlewares(), name="child")\n    delegate, resume, asks = parking_tools(child)\n\n    async def lead_refund(order_id: str) -> str:\n        """Refund as the lead.\n\n        Args:\n            order_id (str): The order.\n        """\n        ran.append(("lead_refund", {"order_id": order_id}))\n        return "lead refunded"\n\n    h = Harness(HarnessConfig(max_model_calls=20), load_entry_points=False)\n    lm = ScriptedModel([calls(("delegate", {"task": "refund"})), calls(("lead_refund", {"order_id": "L-1"})), text("lead done"), text("lead done 2")], model="l")\n    lead = make_agent(lm, [delegate, FunctionTool(lead_refund)], h.middlewares(), name="lead")\n    holder["lead"] = lead\n    async for ev in lead.reply_stream(UserMsg("user", "hi")):\n        if isinstance(ev, RequireUserConfirmEvent):\n            lead_asks.append(ev)\n    print("asks", len(asks), "lead asks", len(lead_asks), ran, flush=True)\n    lrun = h.table.get(lead_asks[-1].reply_id) if lead_asks else None\n    print("lead run report", lrun and lrun.report and lrun.report.terminal_state, flush=True)\n    # resume the child from outside any run\n    ask = asks[-1]\n    answers = [ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]\n    async for item in child.reply_stream(UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=answers), yield_final_msg=True):\n        if isinstance(item, Msg):\n            print("child final", item.get_text_content(), flush=True)\n    print("ran", ran, flush=True)\n    print("lead report", h.last_report(lead) and (h.last_report(lead).terminal_state, h.last_report(lead).reason))\n\nimport faulthandler; faulthandler.dump_traceback_later(10, exit=True)\nasyncio.run(main())\n'


def test_a_lead_resumed_from_its_own_sub_agents_tool_does_not_hang(tmp_path: Any) -> None:
    """The lead parks (its refund awaits a human) after its sub-agent parked
    (its refund too). The human approves the sub-agent's refund first,
    outside any run; the sub-agent's next tool resumes the lead. The lead's
    approved refund must run and the lead must end. Re-nesting had made the
    lead the sub-agent's child, a parent cycle; ``add_tool_call`` then
    looped forever (run in a subprocess: a synchronous loop no asyncio
    timeout can cut)."""
    import subprocess

    script = tmp_path / "cycle.py"
    script.write_text(_CYCLE_SCRIPT)
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        proc = subprocess.run([sys.executable, str(script), tests_dir], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("hung")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "lead_refund" in proc.stdout and "lead report" in proc.stdout


async def test_a_hooks_stop_reason_quoting_an_email_and_a_secret_is_scrubbed_in_the_report() -> None:
    from scripted import search

    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", name="leaky_stop")
    def leaky_stop(ctx: Any) -> None:
        ctx.stop(f"blocked for bob.smith@example.com using {SECRET}")

    h = Harness(HarnessConfig(secret_values=[SECRET]), hooks=[leaky_stop], load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(("search", {"q": "x"})), text("never")]), [search], h.middlewares())
    _, final, report = await drive(h, agent)
    dumped = json.dumps(report.model_dump(mode="json"), default=str)
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert SECRET not in dumped and "bob.smith@example.com" not in dumped
    assert SECRET not in (final.get_text_content() or "")

"""Round 142 c (scenarios: combining with AgentScope's middlewares). README
"Combining with AgentScope's built-in middlewares": "put your own middlewares first
and the harness's two last, `middlewares=[*mine, *harness.middlewares()]`".
DESIGN §4.1: one owner per guarantee ("what the user sees: one output path for
text ..."; "the same shaping for results that enter otherwise"; "a run's life: open,
context vars, settle, report").

- The harness's middlewares added twice (an agent factory adds them, the app appends
  them again): the reply stopped after its start, no model call, and the report said
  `completed` (`answered`) with 0 model calls.
- A middleware of mine, first, swallows the first `ReplyEndEvent` after writing a hint
  (AgentScope's way to force another round): the harness went on enforcing in the extra
  rounds (the call cap, the tool cap, the deadline) but its report had settled at the
  swallowed end and was never updated: `completed` (`answered`) while the user got "it
  took too many steps"; `refusals` `{}` and `model_calls` 2 after 5 calls and 2 refusals.
- A result cache of mine, first, answers a call in `on_acting` without the tool: the
  model read the cached result unredacted (a provider key) and unfenced; the harness's
  admission of the call was never taken.
- A rules (FAQ) middleware of mine answers in `on_reasoning` without the model
  (AgentScope's own pattern): placed first, its answer goes around the harness's output
  path (not redacted, not audited for claims, not held to a finishing tool, while the
  report says `finish_tool_not_called`): a README limit, strict xfails; placed after the
  harness's, the harness's reasoning layer reads it as the model's.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.event import TextBlockDeltaEvent, TextBlockEndEvent, TextBlockStartEvent
from agentscope.message import AssistantMsg, TextBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit
from agentscope.types import ReplyFinishedReason

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError, RunReport, TerminalState, ToolPolicy
from tests.scripted import (
    OneMoreRound,
    ResultCache,
    ScriptedModel,
    calls,
    make_agent,
    run,
    search,
    text,
    tool,
    tool_messages,
)

pytestmark = pytest.mark.asyncio


async def test_the_harness_added_twice_is_refused_naming_it() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    toolkit = h.instrument(Toolkit(tools=[tool(search)]))
    agent = Agent(name="shop", system_prompt="s", model=ScriptedModel([text("hello")]), toolkit=toolkit,
                  middlewares=[*h.middlewares(), *h.middlewares()],
                  injection_config=InjectionConfig(inject_runtime_state=False))
    with pytest.raises(HarnessConfigError, match="added 2 times"):
        await agent.reply(UserMsg("user", "hi"))
    assert h.last_report(agent) is None  # no run was opened: no report says it completed


async def _after_a_swallowed_end(script: list[Any], **config: Any) -> tuple[RunReport, list[Any], str, list[Any]]:
    published: list[RunReport] = []
    h = Harness(HarnessConfig(on_report=published.append, **config), load_entry_points=False, environ={})
    model = ScriptedModel(script)
    agent = make_agent(model, [search], [OneMoreRound("Double-check with one more search."), *h.middlewares()])
    events, final = await run(agent, "research this")
    report = h.last_report(agent)
    assert report is not None and [r.run_id for r in h.reports] == [report.run_id]  # one report of the reply
    assert published[-1] == report  # the superseding one, published last
    shown = [e.value for e in events if getattr(e, "name", None) == "harness.report"]
    assert shown[-1]["terminal_state"] == report.terminal_state.value
    return report, model.calls, final.get_text_content() or "", published


async def test_a_swallowed_end_does_not_freeze_the_report_at_a_cap() -> None:
    report, made, said, _ = await _after_a_swallowed_end(
        [calls(("search", {"q": "a"})), text("first answer"), calls(("search", {"q": "b"})), text("second")],
        max_model_calls=2)
    assert "too many steps" in said  # the cap held
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    assert report.model_calls == len(made) == 2


async def test_a_swallowed_end_does_not_freeze_the_reports_counts() -> None:
    report, made, _, _ = await _after_a_swallowed_end(
        [calls(("search", {"q": "a"})), text("first answer"), calls(("search", {"q": "b"})),
         calls(("search", {"q": "c"})), text("second answer")],
        max_tool_calls=1)
    assert len(made) == 5
    assert report.refusals.get("quota_exhausted") == 2, report.refusals
    assert report.model_calls == 5


async def test_an_end_not_swallowed_is_reported_once() -> None:
    """The control: a reply with no swallowed end publishes one report."""
    published: list[RunReport] = []
    h = Harness(HarnessConfig(on_report=published.append), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "a"})), text("answer")]), [search], h.middlewares())
    await run(agent, "research this")
    assert len(published) == 1 and published[0].terminal_state is TerminalState.COMPLETED


KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
RAN: list[str] = []



async def read_config() -> str:
    """Read the service configuration."""
    RAN.append("read_config")
    return f"api_key={KEY}"


@pytest.mark.parametrize("cached", [True, False], ids=["served_by_the_cache", "control_run"])
async def test_a_result_a_middleware_served_is_shaped_as_the_model_reads_it(cached: bool) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    cache = ResultCache({"read_config": f"api_key={KEY}"} if cached else {})
    model = ScriptedModel([calls(("read_config", {})), text("done")])
    agent = make_agent(model, [read_config], [cache, *h.middlewares()])
    await run(agent, "show the config")
    read = tool_messages(model.calls[1])[-1]
    assert RAN == ([] if cached else ["read_config"])
    assert KEY not in str(model.calls[1].formatted), read
    assert "<tool-output" in read  # fenced as data, as a result the tool made
    run_state = h.table.get(agent.state.reply_id)
    assert run_state is None  # settled: no admission left behind


class RuleAnswers(MiddlewareBase):
    """A FAQ middleware: answers from rules without calling the model
    (AgentScope's own pattern: its events and its message, appended to the context)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def get_middleware_key(self) -> str:
        return "rule_answers"

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        block = TextBlock(text=self.answer)
        reply_id = agent.state.reply_id
        agent.state.append_context(agent.name, [block])
        yield TextBlockStartEvent(reply_id=reply_id, block_id=block.id)
        yield TextBlockDeltaEvent(reply_id=reply_id, block_id=block.id, delta=self.answer)
        yield TextBlockEndEvent(reply_id=reply_id, block_id=block.id)
        yield AssistantMsg(id=reply_id, name=agent.name, content=[block], finished_reason=ReplyFinishedReason.COMPLETED)


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return "refunded"


async def submit_answer(answer: str) -> str:
    """Deliver the final answer.

    Args:
        answer (str): The answer.
    """
    return answer


async def _rules_answer(answer: str, first: bool, **config: Any) -> tuple[RunReport, str, str]:
    h = Harness(HarnessConfig(**config), load_entry_points=False, environ={})
    faq = RuleAnswers(answer)
    chain = [faq, *h.middlewares()] if first else [*h.middlewares(), faq]
    agent = make_agent(ScriptedModel([text("never called")]), [refund, submit_answer], chain)
    events, final = await run(agent, "hi")
    streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    report = h.last_report(agent)
    assert report is not None
    return report, streamed, final.get_text_content() or ""


LIMIT = pytest.mark.xfail(strict=True, reason="README limit: a middleware before the harness's that answers in "
                          "on_reasoning without the model answers around the harness's output path")
ORDERS = pytest.mark.parametrize("first", [pytest.param(True, marks=LIMIT, id="mine_first"),
                                           pytest.param(False, id="harness_first")])


@ORDERS
async def test_a_rules_answer_is_redacted(first: bool) -> None:
    _, streamed, said = await _rules_answer(f"Your API key is {KEY}.", first)
    assert KEY not in streamed and KEY not in said


@ORDERS
async def test_a_rules_answer_is_audited_for_claims(first: bool) -> None:
    report, _, said = await _rules_answer(
        "The refund was issued.", first,
        tools={"refund": ToolPolicy(role="mutation", claims=[r"refund was issued"])})
    assert "refund was issued" not in said
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "unsupported_claim")


@ORDERS
async def test_a_rules_answer_is_held_to_the_finishing_tool(first: bool) -> None:
    report, streamed, said = await _rules_answer(
        "Your order ships tomorrow.", first, tools={"submit_answer": ToolPolicy(role="finish")})
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "finish_tool_not_called")
    assert "ships tomorrow" not in said and "ships tomorrow" not in streamed

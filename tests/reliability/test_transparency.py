"""Transparency: with a default ``HarnessConfig()`` and nothing triggering, an
agent behaves as without the harness: the same tools run, the same final
text and finish reason, the same number of model calls, the same shape of
history, including structured output, human-in-the-loop confirmation and
interruption. Every scenario runs side by side: bare vs harnessed.

Known, intended differences (asserted where they show):
- a successful tool result's text reaches the model inside the run's nonce
  fence (the ``ToolResponse`` also carries ``metadata["harness"]``, which
  AgentScope does not copy into the stored result);
- a tool's chunks reach the caller as one chunk after the call (post_tool_call
  hooks must see the whole result before the model or user does);
- streamed text deltas are re-cut by the stream redactor (same joined text);
- ``harness.decision`` / ``harness.report`` CustomEvents are added.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from agentscope.agent import ReActConfig
from agentscope.event import (
    ConfirmResult,
    CustomEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    ToolCallDeltaEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool
from pydantic import BaseModel
from relkit import assert_context_well_formed, result_text
from scripted import ScriptedModel, calls, make_agent, text, tool

from agentscope_harness import Harness, HarnessConfig, TerminalState

# the output filter re-cuts text and tool-call argument deltas (held back
# while they could still become a secret): compared as whole texts instead
SKIPPED_EVENTS = (CustomEvent, TextBlockDeltaEvent, ToolCallDeltaEvent, ToolResultTextDeltaEvent)


class Side:
    """One side of the comparison: an agent, its model, what its tools did."""

    def __init__(self, script: list, tools_factory, harnessed: bool, stream: bool = False,
                 max_iters: int = 20, **react: Any) -> None:
        self.ran: list[str] = []
        self.harness = Harness(HarnessConfig()) if harnessed else None
        self.model = ScriptedModel(_copy(script), stream=stream)
        self.agent = make_agent(
            self.model, tools_factory(self.ran),
            self.harness.middlewares() if self.harness else [], max_iters=max_iters,
        )
        if react:
            self.agent.react_config = ReActConfig(max_iters=max_iters, **react)
        self.events: list[Any] = []
        self.finals: list[Msg] = []

    async def reply(self, inputs: Any, **kw: Any) -> Msg | None:
        final = None
        async for item in self.agent.reply_stream(inputs, yield_final_msg=True, **kw):
            if isinstance(item, Msg):
                final = item
            else:
                self.events.append(item)
        self.finals.append(final)
        return final

    def shape(self) -> list[str]:
        """Event types, without the ones the harness re-cuts or adds; the
        events of concurrent tool calls interleave by timing, so each run of
        tool-result events is compared as a multiset."""
        out: list[str] = []
        group: list[str] = []
        for e in self.events:
            if isinstance(e, SKIPPED_EVENTS):
                continue
            name = type(e).__name__
            if name.startswith("ToolResult"):
                group.append(name)
                continue
            if group:
                out.extend(sorted(group))
                group = []
            out.append(name)
        return out + sorted(group)

    def streamed_text(self) -> str:
        return "".join(e.delta for e in self.events if isinstance(e, TextBlockDeltaEvent))

    def streamed_args(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for e in self.events:
            if isinstance(e, ToolCallDeltaEvent):
                out[e.tool_call_id] = out.get(e.tool_call_id, "") + e.delta
        return out

    def history(self) -> list[tuple]:
        out = []
        for msg in self.agent.state.context:
            blocks = [msg.content] if isinstance(msg.content, str) else msg.content
            for b in blocks:
                if isinstance(b, ToolResultBlock):
                    out.append(("result", b.name, str(b.state)))
                elif isinstance(b, ToolCallBlock):
                    out.append(("call", b.name, b.input))
                elif isinstance(b, TextBlock):
                    out.append(("text", msg.role, b.text))
                elif isinstance(b, str):
                    out.append(("text", msg.role, b))
                else:
                    out.append((type(b).__name__,))
        return out


def _copy(script: list) -> list:
    # tool call ids are re-minted per call by ScriptedModel; keep the same ids
    # on both sides for HITL resumption by copying blocks
    return [copy.deepcopy(s) for s in script]


def assert_same(bare: Side, harnessed: Side) -> None:
    assert harnessed.ran == bare.ran
    assert len(harnessed.model.calls) == len(bare.model.calls)
    assert [f and f.get_text_content() for f in harnessed.finals] == [f and f.get_text_content() for f in bare.finals]
    assert [f and str(f.finished_reason) for f in harnessed.finals] == [f and str(f.finished_reason) for f in bare.finals]
    assert [f and f.structured_output for f in harnessed.finals] == [f and f.structured_output for f in bare.finals]
    assert harnessed.shape() == bare.shape()
    assert harnessed.streamed_text() == bare.streamed_text()
    assert sorted(harnessed.streamed_args().values()) == sorted(bare.streamed_args().values())
    assert _normalise(harnessed.history()) == _normalise(bare.history())
    # what the model was asked with: same tools and tool_choice
    for h, b in zip(harnessed.model.calls, bare.model.calls):
        assert h["tools"] == b["tools"] and h["tool_choice"] == b["tool_choice"]
        assert [m["role"] for m in h["formatted"]] == [m["role"] for m in b["formatted"]]
    assert_context_well_formed(harnessed.agent)
    assert len(harnessed.harness.table) == (1 if _parked(harnessed) else 0)


def _normalise(history: list[tuple]) -> list[tuple]:
    """Concurrent results are stored in completion order: compare each run
    of consecutive results as a multiset."""
    out: list[tuple] = []
    group: list[tuple] = []
    for item in history:
        if item[0] == "result":
            group.append(item)
            continue
        out.extend(sorted(group))
        group = []
        out.append(item)
    return out + sorted(group)


def _parked(side: Side) -> bool:
    return bool(side.agent.state.has_awaiting_tool_calls(side.agent.name))


def shop_tools(ran: list[str]):
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        await asyncio.sleep(0.001)
        ran.append(f"search:{q}")
        return f"3 results for {q}"

    async def stock(sku: str) -> str:
        """Stock of an item.

        Args:
            sku (str): The item.
        """
        ran.append(f"stock:{sku}")
        if sku == "bad":
            raise ValueError("unknown sku")
        return f"{sku}: 4 left"

    async def slow(seconds: float) -> str:
        """Wait.

        Args:
            seconds (float): How long.
        """
        ran.append("slow:start")
        await asyncio.sleep(seconds)
        ran.append("slow:end")
        return "slept"

    async def ship(order: str) -> str:
        """Ship an order (asks the user first).

        Args:
            order (str): The order.
        """
        ran.append(f"ship:{order}")
        return f"shipped {order}"

    return [
        tool(search), tool(stock), tool(slow, is_concurrency_safe=False),
        FunctionTool(ship),  # no permission: AgentScope asks the user
    ]


async def both(script: list, drive, **kw: Any) -> tuple[Side, Side]:
    bare, harnessed = Side(script, shop_tools, False, **kw), Side(script, shop_tools, True, **kw)
    await drive(bare)
    await drive(harnessed)
    assert_same(bare, harnessed)
    return bare, harnessed


def fixed_calls(*specs: tuple[str, str, dict | str]) -> ChatResponse:
    import json

    return ChatResponse(
        content=[ToolCallBlock(id=i, name=n, input=a if isinstance(a, str) else json.dumps(a)) for i, n, a in specs],
        is_last=True, usage=ChatUsage(input_tokens=100, output_tokens=10, time=0.0),
    )


# ---------------------------------------------------------------- plain

@pytest.mark.parametrize("stream", [False, True])
async def test_tools_errors_and_text_behave_the_same(stream: bool) -> None:
    script = [
        calls(("search", {"q": "shoes"}), ("stock", {"sku": "a1"})),
        calls(("stock", {"sku": "bad"}), ("nope", {"x": 1}), ("search", '{"q": "unterminated')),
        calls(("search", {"q": 3})),  # wrong type: AgentScope repairs/validates it
        text("Here are your shoes. " * 20),
    ]

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "find shoes"))
        side.model.script = [text("second reply")]
        await side.reply(UserMsg("user", "thanks"))

    bare, harnessed = await both(script, drive, stream=stream)
    report = harnessed.harness.last_report(harnessed.agent)
    assert report.terminal_state == TerminalState.COMPLETED and report.refusals == {}
    assert harnessed.finals[0].get_text_content() == "Here are your shoes. " * 20
    # the one visible difference: the fence around a successful result
    h_payload = harnessed.model.calls[1]["formatted"]
    tool_msgs = [m for m in h_payload if m["role"] == "tool"]
    assert any("<tool-output nonce=" in str(m["content"]) for m in tool_msgs)


async def test_max_iters_exceeded_behaves_the_same() -> None:
    script = [calls(("search", {"q": f"q{i}"})) for i in range(3)] + [text("never")]

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "loop"))

    bare, harnessed = await both(script, drive, max_iters=2)
    assert str(bare.finals[0].finished_reason) == str(harnessed.finals[0].finished_reason)
    assert harnessed.harness.last_report(harnessed.agent).terminal_state == TerminalState.INCOMPLETE


# ------------------------------------------------------ structured output

class WeatherReport(BaseModel):
    """The structured output schema."""

    city: str
    temperature: float


STRUCTURED = "GenerateStructuredOutput"  # agentscope/agent/_structured_output_tool.py


@pytest.mark.parametrize("case", ["direct", "after_tool", "validation_retry", "forced_at_max_iters", "grace_exhausted"])
async def test_structured_output_behaves_the_same(case: str) -> None:
    good = (STRUCTURED, {"city": "Hangzhou", "temperature": 25.0})
    react: dict[str, Any] = {}
    max_iters = 20
    if case == "direct":
        script = [calls(good)]
    elif case == "after_tool":
        script = [calls(("search", {"q": "weather"})), calls(good)]
    elif case == "validation_retry":
        script = [calls((STRUCTURED, {"city": "Hangzhou", "temperature": "hot"})), calls(good)]
    elif case == "forced_at_max_iters":
        script, max_iters = [text("Let me think more."), calls(good)], 1
    else:
        script, max_iters = [text("Let me think more."), text("Let me think more.")], 1
        react = {"structured_output_grace_iters": 1}

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "Weather in Hangzhou?"), structured_schema=WeatherReport)

    bare, harnessed = await both(script, drive, max_iters=max_iters, **react)
    if case == "grace_exhausted":
        assert harnessed.finals[0].structured_output is None
    else:
        assert harnessed.finals[0].structured_output == {"city": "Hangzhou", "temperature": 25.0}


# ----------------------------------------------------- human in the loop

@pytest.mark.parametrize("confirmed", [True, False])
async def test_hitl_confirmation_behaves_the_same(confirmed: bool) -> None:
    script = [fixed_calls(("c1", "ship", {"order": "o-1"}), ("c2", "search", {"q": "box"})), text("shipping handled")]

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "ship my order"))
        ask = next(e for e in side.events if isinstance(e, RequireUserConfirmEvent))
        if side.harness:
            assert side.harness.last_report(side.agent).terminal_state == TerminalState.WAITING_INPUT
        await side.reply(UserConfirmResultEvent(
            reply_id=ask.reply_id,
            confirm_results=[ConfirmResult(confirmed=confirmed, tool_call=tc) for tc in ask.tool_calls],
        ))

    bare, harnessed = await both(script, drive)
    assert ("ship:o-1" in harnessed.ran) is confirmed
    report = harnessed.harness.last_report(harnessed.agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.tool_calls == ({"ship": 1, "search": 1} if confirmed else {"search": 1})
    assert len(harnessed.harness.table) == 0


async def test_user_interrupt_on_a_parked_reply_behaves_the_same() -> None:
    script = [fixed_calls(("c1", "ship", {"order": "o-1"})), text("never")]

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "ship"))
        await side.reply(UserInterruptEvent(reply_id=side.agent.state.reply_id))
        await side.reply(UserInterruptEvent(reply_id=side.agent.state.reply_id))  # idle: a no-op
        side.model.script = [text("fresh start")]
        await side.reply(UserMsg("user", "hello again"))

    bare, harnessed = await both(script, drive)
    assert harnessed.ran == []
    assert harnessed.finals[-1].get_text_content() == "fresh start"
    assert len(harnessed.harness.table) == 0
    states = [r.terminal_state for r in harnessed.harness.reports]
    assert TerminalState.CANCELLED in states and states[-1] == TerminalState.COMPLETED


@pytest.mark.parametrize("concurrent", [True, False])
async def test_task_cancel_mid_tool_behaves_the_same(concurrent: bool) -> None:
    name = "search" if concurrent else "slow"

    def factory(ran: list[str]):
        tools = shop_tools(ran)

        async def search(q: str) -> str:
            """Search slowly.

            Args:
                q (str): The query.
            """
            ran.append("search:start")
            await asyncio.sleep(5)
            return "late"

        if concurrent:
            tools[0] = tool(search)
        return tools

    # distinct arguments: an identical call in the same batch is a duplicate
    one, two = ({"q": "x"}, {"q": "y"}) if concurrent else ({"seconds": 5}, {"seconds": 6})
    script = [calls((name, one), (name, two), ("stock", {"sku": "a"})), text("never")]

    async def drive(side: Side) -> None:
        task = asyncio.create_task(side.reply(UserMsg("user", "wait")))
        for _ in range(300):
            await asyncio.sleep(0.01)
            if any(r.endswith(":start") for r in side.ran):
                break
        await asyncio.sleep(0.05)
        task.cancel()
        await task
        side.model.script = [text("next")]
        await side.reply(UserMsg("user", "again"))

    bare = Side(script, factory, False)
    harnessed = Side(script, factory, True)
    await drive(bare)
    await drive(harnessed)
    assert sorted(harnessed.ran) == sorted(bare.ran)
    assert len(harnessed.model.calls) == len(bare.model.calls)
    assert [f.get_text_content() for f in harnessed.finals] == [f.get_text_content() for f in bare.finals]
    assert [str(f.finished_reason) for f in harnessed.finals] == [str(f.finished_reason) for f in bare.finals]
    assert sorted(harnessed.history()) == sorted(bare.history())
    assert_context_well_formed(harnessed.agent)
    states = [r.terminal_state for r in harnessed.harness.reports]
    assert states == [TerminalState.CANCELLED, TerminalState.COMPLETED]


async def test_results_differ_only_by_the_fence_and_metadata() -> None:
    """Write down the difference exactly: the result text is the bare text
    inside this run's fence; nothing else about the result changes."""
    script = [calls(("search", {"q": "a"})), text("ok")]

    async def drive(side: Side) -> None:
        await side.reply(UserMsg("user", "x"))

    bare, harnessed = await both(script, drive)
    pick = lambda side: next(b for m in side.agent.state.context if not isinstance(m.content, str)  # noqa: E731
                             for b in m.content if isinstance(b, ToolResultBlock))
    b, h = pick(bare), pick(harnessed)
    lines = result_text(h).split("\n")
    assert lines[0].startswith('<tool-output nonce="') and lines[-1].startswith("</tool-output nonce=")
    assert "\n".join(lines[1:-1]) == result_text(b)
    assert h.state == b.state and h.metadata == b.metadata

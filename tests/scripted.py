"""Helpers for driving a real Agent in tests. The scripted model is the
package's public ``agentscope_harness.testing.ScriptedModel`` (a real
``ChatModelBase``; only ``_call_api`` is scripted)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.event import (
    ConfirmResult,
    ExternalExecutionResultEvent,
    ReplyEndEvent,
    RequireExternalExecutionEvent,
    UserConfirmResultEvent,
)
from agentscope.message import HintBlock, Msg, TextBlock, ToolResultBlock, ToolResultState, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolBase, Toolkit, ToolResponse
from pydantic import BaseModel

from agentscope_harness import HarnessConfig, Principal
from agentscope_harness.context import REASONS
from agentscope_harness.testing import ScriptedModel, Turn, calls, text

__all__ = [
    "ALICE",
    "ALLOW",
    "BOB",
    "RAN",
    "REDIS_URL",
    "STORE_DOWN",
    "ScriptedModel",
    "Turn",
    "calls",
    "client_result",
    "client_tool",
    "confirm",
    "decisions",
    "drain",
    "last_tool_message",
    "make_agent",
    "payload_bytes",
    "redis_url",
    "run",
    "search",
    "slow",
    "text",
    "tool",
    "tool_messages",
    "until_question",
]

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in tests")

REDIS_URL = "redis://127.0.0.1:6399/1"
"""The Redis ``.ci/run`` starts, as the red-team tests use it (db 1; each
test under a key prefix of its own)."""

def redis_url() -> str:
    """``REDIS_URL`` when a Redis answers there; else the calling test is
    skipped, saying why (README: Redis-backed tests are skipped with a
    message where no redis-server can be had)."""
    import pytest

    redis = pytest.importorskip("redis", reason="Redis tests need the redis package")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5)
    try:
        client.ping()
    except redis.exceptions.RedisError:
        pytest.skip(f"no Redis answers at {REDIS_URL} (.ci/run starts one): Redis test skipped")
    finally:
        client.close()
    return REDIS_URL


ALICE = Principal(user_id="u-42", tenant="acme")
BOB = Principal(user_id="u-7", tenant="acme")
"""Two callers of one tenant (the red-team tests' signed-in users)."""

STORE_DOWN = HarnessConfig().fallback_text.format(reason=REASONS["dependency_down"])
"""The answer of a run whose store is down: the truth, not the budget's words."""

RAN: list[str] = []
"""What the shared tools below ran; emptied before every test (conftest)."""


class SlowModel(ScriptedModel):
    """A scripted model whose every request takes ``delay`` seconds (calls
    overlap, a deadline or a cancellation can land mid-request); counts
    the requests that went out."""

    def __init__(self, *args: Any, delay: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay = delay
        self.requests_out = 0

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.requests_out += 1  # the request is on the wire from here
        await asyncio.sleep(self.delay)
        return await super()._call_api(*args, **kwargs)


class Ids(BaseModel):
    """A structured output: the ids a reranker keeps."""

    ids: list[str]


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    RAN.append(q)
    return f"found {q}"


async def slow(seconds: float) -> str:
    """Wait.

    Args:
        seconds (float): How long.
    """
    RAN.append("slow:start")
    await asyncio.sleep(seconds)
    RAN.append("slow:end")
    return "slept"


async def slow_started() -> None:
    """Once ``slow`` has started (in another task)."""
    while "slow:start" not in RAN:
        await asyncio.sleep(0.01)


def tool(fn: Callable[..., Any], **kw: Any) -> FunctionTool:
    """A FunctionTool that is always permitted (AgentScope asks by default)."""
    kw.setdefault("permission", ALLOW)
    return FunctionTool(fn, **kw)


def make_agent(model: ChatModelBase, tools: list[Any], middlewares: list[Any] | None = None,
               name: str = "shop", max_iters: int = 50, **kw: Any) -> Agent:
    """A real Agent with runtime-state injection off (its clock hints would
    make payloads differ between runs)."""
    toolkit = tools if isinstance(tools, Toolkit) else Toolkit(
        tools=[t if isinstance(t, ToolBase) else tool(t) for t in tools],
    )
    return Agent(
        name=name,
        system_prompt="You are a helpful shop assistant.",
        model=model,
        toolkit=toolkit,
        middlewares=middlewares or [],
        injection_config=InjectionConfig(inject_runtime_state=False),
        react_config=ReActConfig(max_iters=max_iters),
        **kw,
    )


async def run(agent: Agent, prompt: str = "hi", inputs: Any = None) -> tuple[list[Any], Msg]:
    """Drive one reply; the streamed events and the final message."""
    events, final = [], None
    src = inputs if inputs is not None else UserMsg("user", prompt)
    async for item in agent.reply_stream(src, yield_final_msg=True):
        if isinstance(item, Msg):
            final = item
        else:
            events.append(item)
    return events, final


async def drain(agent: Agent, inputs: Any) -> list[Any]:
    """Every item of one reply's stream, the final message last."""
    return [e async for e in agent.reply_stream(inputs, yield_final_msg=True)]


def confirm(ask: Any, call: Any, confirmed: bool = True) -> UserConfirmResultEvent:
    """A human's answer to ``ask`` (a ``RequireUserConfirmEvent``) on ``call``."""
    return UserConfirmResultEvent(reply_id=ask.reply_id,
                                  confirm_results=[ConfirmResult(confirmed=confirmed, tool_call=call)])


def tool_messages(call: dict[str, Any]) -> list[str]:
    """The tool results the model received in one call, in payload order."""
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in call["formatted"] if m["role"] == "tool"]


def last_tool_message(model: ScriptedModel) -> str:
    """The newest tool result in the newest payload."""
    return tool_messages(model.calls[-1])[-1]


def payload_bytes(call: dict[str, Any]) -> str:
    """The formatted messages of a call as canonical JSON."""
    return json.dumps(call["formatted"], sort_keys=True, ensure_ascii=False)


def decisions(events: list[Any]) -> list[dict[str, Any]]:
    """The ``harness.decision`` events of a reply."""
    return [e.value for e in events if getattr(e, "name", None) == "harness.decision"]


def fetching(page: str) -> Callable[..., Any]:
    """A ``fetch(url)`` tool that answers ``page`` (a result of a known size)."""

    async def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url (str): The page.
        """
        return page

    return fetch


def delegating_tool(child: Agent, name: str = "delegate") -> Callable[..., Any]:
    """A lead's tool (``name``) that asks a sub-agent and returns its answer."""

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        msg = await child.reply(UserMsg("parent", task))
        return msg.get_text_content() or ""

    delegate.__name__ = name
    return delegate


def parking_tools(child: Agent) -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    """A lead's two tools around a sub-agent that parks for a human:
    ``delegate`` runs it (keeping its confirmation requests, the third
    value), ``resume`` answers the last one approved and returns what the
    sub-agent then said."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent

    asks: list[Any] = []

    async def delegate(task: str) -> str:
        """Ask the sub-agent.

        Args:
            task (str): What.
        """
        async for event in child.reply_stream(UserMsg("lead", task)):
            if isinstance(event, RequireUserConfirmEvent):
                asks.append(event)
        return "parked" if asks else "done"

    async def resume(task: str) -> str:
        """Tell the sub-agent the human approved.

        Args:
            task (str): What.
        """
        ask = asks[-1]
        answers = [ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]
        said = [item.get_text_content() or "" async for item in child.reply_stream(
            UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=answers), yield_final_msg=True,
        ) if isinstance(item, Msg)]
        return " ".join(said) or "resumed"

    return delegate, resume, asks


def client_tool(name: str = "verify_code", concurrent: bool = False) -> ToolBase:
    """A tool the client executes (``is_external_tool``): AgentScope parks
    the reply on a ``RequireExternalExecutionEvent`` until the client's
    ``ExternalExecutionResultEvent`` answers it. ``concurrent``: the
    batch's other concurrency-safe calls run beside its question."""

    class ClientTool(ToolBase):
        description = "Check the one-time code on the user's device."
        input_schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}
        is_concurrency_safe = concurrent
        is_read_only = True
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
            return ALLOW

    ClientTool.name = name
    return ClientTool()


def client_result(asked: RequireExternalExecutionEvent, said: str = "code ok") -> ExternalExecutionResultEvent:
    """The client's answer ``said`` to the first call ``asked`` left to it."""
    call = asked.tool_calls[0]
    result = ToolResultBlock(id=call.id, name=call.name, output=[TextBlock(text=said)], state=ToolResultState.SUCCESS)
    return ExternalExecutionResultEvent(reply_id=asked.reply_id, execution_results=[result])


async def until_question(agent: Agent, inputs: Any, kind: type = RequireExternalExecutionEvent,
                         close: bool = True) -> Any:
    """Read a reply up to its first event of ``kind``, the question; then
    close the stream (README: the reply is left parked as at its end), or,
    ``close=False``, return ``(the open stream, the question)``."""
    stream = agent.reply_stream(inputs, yield_final_msg=True)
    asked = None
    async for item in stream:
        if isinstance(item, kind):
            asked = item
            break
    assert asked is not None, f"the reply ended without a {kind.__name__}"
    if not close:
        return stream, asked
    await stream.aclose()
    return asked


class OneMoreRound(MiddlewareBase):
    """A user's self-check middleware, placed first: swallows the reply's
    first end after writing a hint (AgentScope's way to ask for another round)."""

    def __init__(self, hint: str = "Check your answer once more.") -> None:
        self.hint, self.swallowed = hint, 0

    async def get_middleware_key(self) -> str:
        return "one_more_round"

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, ReplyEndEvent) and self.swallowed == 0:
                self.swallowed += 1
                agent.state.append_context(agent.name, [HintBlock(hint=self.hint)])
                continue
            yield event


class ResultCache(MiddlewareBase):
    """A user's tool-result cache, placed first: a call of a tool it holds
    (by name) is answered in ``on_acting`` without the tool."""

    def __init__(self, cached: dict[str, str]) -> None:
        self.cached = cached

    async def get_middleware_key(self) -> str:
        return "result_cache"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        hit = self.cached.get(input_kwargs["tool_call"].name)
        if hit is not None:
            yield ToolResponse(content=[TextBlock(text=hit)], state=ToolResultState.SUCCESS)
            return
        async for item in next_handler(**input_kwargs):
            yield item

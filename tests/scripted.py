"""A scripted AgentScope chat model and helpers for driving a real Agent.

The model is a real ``ChatModelBase`` subclass: AgentScope's own ``__call__``
does retries, streaming accumulation and cancellation; only ``_call_api`` is
scripted. Every call records the exact formatted payload the provider would
receive, so tests can assert on what the model was told.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in tests")


class _Credential(CredentialBase):
    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ScriptedModel


def text(answer: str, inp: int = 100, out: int = 10) -> ChatResponse:
    """A final text answer."""
    return ChatResponse(
        content=[TextBlock(text=answer)], is_last=True,
        usage=ChatUsage(input_tokens=inp, output_tokens=out, time=0.0),
    )


def calls(*specs: tuple[str, dict | str], inp: int = 100, out: int = 10) -> ChatResponse:
    """One assistant turn with one or more (parallel) tool calls. A ``str``
    argument is sent as the raw (possibly malformed) JSON input."""
    blocks = [
        ToolCallBlock(
            id=f"call_{uuid.uuid4().hex[:10]}",
            name=name,
            input=args if isinstance(args, str) else json.dumps(args),
        )
        for name, args in specs
    ]
    return ChatResponse(
        content=blocks, is_last=True,
        usage=ChatUsage(input_tokens=inp, output_tokens=out, time=0.0),
    )


class ScriptedModel(ChatModelBase):
    """Plays a script of responses. A script item may be a ``ChatResponse``,
    an exception (raised) or a callable ``(call_record) -> ChatResponse``.
    ``repeat`` replays the last item forever (a stubborn model)."""

    class Parameters(BaseModel):
        """No parameters."""

    def __init__(
        self,
        script: list[Any],
        stream: bool = False,
        model: str = "scripted",
        repeat: bool = False,
        chunk: int = 5,
    ) -> None:
        super().__init__(
            credential=_Credential(), model=model, parameters=self.Parameters(),
            stream=stream, max_retries=0, context_size=1_000_000,
        )
        self.formatter = OpenAIChatFormatter()
        self.script = list(script)
        self.repeat = repeat
        self.chunk = chunk
        self.calls: list[dict[str, Any]] = []

    async def _call_api(self, model_name: str, messages: list, tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> Any:
        record = {
            "model": model_name,
            "messages": list(messages),
            "formatted": await self.formatter.format(messages),
            "tools": tools,
            "tool_choice": tool_choice,
        }
        self.calls.append(record)
        if not self.script:
            raise AssertionError(f"script of {self.model} exhausted after {len(self.calls)} calls")
        step = self.script[0] if self.repeat and len(self.script) == 1 else self.script.pop(0)
        if callable(step) and not isinstance(step, ChatResponse):
            step = step(record)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ChatResponse) and any(isinstance(b, ToolCallBlock) for b in step.content):
            # fresh ids: a replayed turn must not reuse call ids
            step = ChatResponse(
                content=[
                    b.model_copy(update={"id": f"call_{uuid.uuid4().hex[:10]}"})
                    if isinstance(b, ToolCallBlock) else b
                    for b in step.content
                ],
                is_last=True,
                usage=step.usage,
            )
        return self._stream(step) if self.stream else step

    async def _stream(self, res: ChatResponse):
        for block in res.content:
            if isinstance(block, TextBlock):
                for i in range(0, max(len(block.text), 1), self.chunk):
                    yield ChatResponse(
                        content=[TextBlock(id=block.id, text=block.text[i:i + self.chunk])],
                        is_last=False,
                    )
            elif isinstance(block, ToolCallBlock):
                yield ChatResponse(content=[block], is_last=False)
        yield ChatResponse(content=[], is_last=False, usage=res.usage)


def tool(fn: Callable[..., Any], **kw: Any) -> FunctionTool:
    """A FunctionTool that is always permitted (AgentScope asks by default)."""
    kw.setdefault("permission", ALLOW)
    return FunctionTool(fn, **kw)


def make_agent(model: ChatModelBase, tools: list[Any], middlewares: list[Any] | None = None,
               name: str = "shop", max_iters: int = 50, **kw: Any) -> Agent:
    """A real Agent with runtime-state injection off (its clock hints would
    make payloads differ between runs)."""
    toolkit = tools if isinstance(tools, Toolkit) else Toolkit(
        tools=[t if isinstance(t, FunctionTool) else tool(t) for t in tools],
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

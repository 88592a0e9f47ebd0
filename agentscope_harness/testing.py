"""Offline testing aids: a scripted AgentScope chat model, to test a policy
(or your own hooks) on a real ``Agent`` without an API key.

Only ``_call_api`` is scripted: AgentScope's own ``ChatModelBase.__call__``
does retries, streaming accumulation and cancellation, as with a provider.
Every call records the exact payload the provider would receive, so a test
can assert on what the model was told.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from pydantic import BaseModel

__all__ = ["ScriptedModel", "Turn", "calls", "text"]


@dataclass
class Turn:
    """One call the scripted model received. Readable like a dict too
    (``turn["formatted"]``)."""

    formatted: list[dict[str, Any]]
    tool_choice: Any
    model: str
    tools: Any = None
    messages: list[Any] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    @property
    def tool_results(self) -> list[str]:
        """Tool results in the payload, oldest first."""
        return [
            m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            for m in self.formatted
            if m.get("role") == "tool"
        ]

    @property
    def last_result(self) -> str:
        """The newest tool result ("" before any tool ran)."""
        results = self.tool_results
        return results[-1] if results else ""

    @property
    def rounds(self) -> int:
        """Assistant turns with tool calls so far in the payload."""
        return sum(1 for m in self.formatted if m.get("role") == "assistant" and m.get("tool_calls"))

    @property
    def payload_tokens(self) -> int:
        """A rough token count of the whole payload (4 characters a token)."""
        return len(json.dumps(self.formatted, ensure_ascii=False)) // 4


def text(answer: str, inp: int = 100, out: int = 10) -> ChatResponse:
    """A final text answer."""
    return ChatResponse(
        content=[TextBlock(text=answer)], is_last=True,
        usage=ChatUsage(input_tokens=inp, output_tokens=out, time=0.0),
    )


def calls(*specs: tuple[str, dict[str, Any] | str], inp: int = 100, out: int = 10) -> ChatResponse:
    """One assistant turn with one or more (parallel) tool calls. A ``str``
    argument is sent as the raw (possibly malformed) JSON input."""
    return ChatResponse(
        content=[
            ToolCallBlock(
                id=_call_id(), name=name,
                input=args if isinstance(args, str) else json.dumps(args),
            )
            for name, args in specs
        ],
        is_last=True,
        usage=ChatUsage(input_tokens=inp, output_tokens=out, time=0.0),
    )


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:10]}"


class _Credential(CredentialBase):
    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return ScriptedModel


Step = ChatResponse | BaseException | Callable[[Turn], Any]


class ScriptedModel(ChatModelBase):
    """Plays a script: a list of steps (a ``ChatResponse``, an exception to
    raise, or a callable ``(turn) -> ChatResponse``) or one callable for
    every call. ``repeat`` replays the last step forever (a stubborn model);
    otherwise running out of script fails loudly."""

    class Parameters(BaseModel):
        """No parameters."""

    def __init__(
        self,
        script: list[Step] | Callable[[Turn], ChatResponse],
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
        self.script: list[Step] | Callable[[Turn], ChatResponse] = (
            script if callable(script) else list(script)
        )
        self.repeat = repeat
        self.chunk = chunk
        self.calls: list[Turn] = []
        self.usage: list[ChatUsage] = []
        """Usage of every response served (what this model would bill)."""

    async def _call_api(self, model_name: str, messages: list, tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> Any:
        turn = Turn(
            formatted=await self.formatter.format(messages), tool_choice=tool_choice,
            model=model_name, tools=tools, messages=list(messages),
        )
        self.calls.append(turn)
        step = self._next_step()
        if callable(step) and not isinstance(step, ChatResponse):
            step = step(turn)
        if isinstance(step, BaseException):
            raise step
        if step.usage is not None:
            self.usage.append(step.usage)
        if any(isinstance(b, ToolCallBlock) for b in step.content):
            # a replayed turn must not reuse call ids
            step = ChatResponse(
                content=[
                    b.model_copy(update={"id": _call_id()}) if isinstance(b, ToolCallBlock) else b
                    for b in step.content
                ],
                is_last=True,
                usage=step.usage,
            )
        return self._stream(step) if self.stream else step

    def _next_step(self) -> Step:
        if callable(self.script):
            return self.script
        if not self.script:
            raise AssertionError(f"script of {self.model} exhausted after {len(self.calls)} calls")
        if self.repeat and len(self.script) == 1:
            return self.script[0]
        return self.script.pop(0)

    async def _stream(self, res: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
        for block in res.content:
            if isinstance(block, TextBlock):
                for i in range(0, max(len(block.text), 1), self.chunk):
                    yield ChatResponse(
                        content=[TextBlock(id=block.id, text=block.text[i:i + self.chunk])],
                        is_last=False,
                    )
            else:
                yield ChatResponse(content=[block], is_last=False)
        yield ChatResponse(content=[], is_last=False, usage=res.usage)

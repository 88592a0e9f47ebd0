"""A zero-latency scripted chat model for the benchmarks.

A real ``ChatModelBase`` subclass: AgentScope's own ``__call__`` (retries,
accumulation) runs; only ``_call_api`` is scripted. Like a real provider
model it formats the messages for the API on every call (OpenAI chat
format), and keeps that payload so the benchmarks can count what the model
was sent. It never sleeps.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from pydantic import BaseModel

_ids = itertools.count()


class _Credential(CredentialBase):
    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return BenchModel


def _usage() -> ChatUsage:
    return ChatUsage(input_tokens=100, output_tokens=10, time=0.0)


def say(answer: str) -> ChatResponse:
    """A final text answer."""
    return ChatResponse(content=[TextBlock(text=answer)], is_last=True, usage=_usage())


def call(name: str, **args: Any) -> ChatResponse:
    """One assistant turn with one tool call."""
    return ChatResponse(
        content=[ToolCallBlock(id=f"call_{next(_ids)}", name=name, input=json.dumps(args))],
        is_last=True,
        usage=_usage(),
    )


class BenchModel(ChatModelBase):
    """Plays ``script``: each item is a ``ChatResponse`` or a callable
    ``(n_call) -> ChatResponse``. With ``repeat=True`` the last item is
    replayed forever (a stubborn model). ``keep_payloads`` keeps the
    formatted payload of every call in ``payloads``."""

    class Parameters(BaseModel):
        """No parameters."""

    def __init__(
        self,
        script: list[Any],
        *,
        repeat: bool = False,
        keep_payloads: bool = False,
        model: str = "bench-model",
        max_calls: int = 1_000,
    ) -> None:
        super().__init__(
            credential=_Credential(), model=model, parameters=self.Parameters(),
            stream=False, max_retries=0, context_size=10_000_000,
        )
        self.formatter = OpenAIChatFormatter()
        self.script = list(script)
        self.repeat = repeat
        self.keep_payloads = keep_payloads
        self.max_calls = max_calls
        self.payloads: list[list[dict[str, Any]]] = []
        self.tools_sent: list[str] = []
        self.tool_choices: list[Any] = []
        self.served_by: list[str] = []
        self.n_calls = 0
        self._shared = self

    def twin(self, model: str) -> BenchModel:
        """Another model (a cheaper tier) that plays the same script and
        records into the same lists, so a run reads as one sequence."""
        other = BenchModel([], model=model)
        other._shared = self
        return other

    async def _call_api(self, model_name: str, messages: list, tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        me = self._shared
        formatted = await self.formatter.format(messages)  # what a provider would send
        if me.keep_payloads:
            me.payloads.append(formatted)
            me.tools_sent.append(json.dumps(tools or [], sort_keys=True, ensure_ascii=False))
            me.served_by.append(model_name)
        me.tool_choices.append(tool_choice)
        me.n_calls += 1
        if me.n_calls > me.max_calls:
            raise RuntimeError(f"{me.model}: more than {me.max_calls} calls")
        if not me.script:
            raise RuntimeError(f"script exhausted after {me.n_calls} calls")
        step = me.script[0] if me.repeat and len(me.script) == 1 else me.script.pop(0)
        if callable(step) and not isinstance(step, ChatResponse):
            step = step(me.n_calls)
        return _fresh_ids(step)


def _fresh_ids(res: ChatResponse) -> ChatResponse:
    """A replayed turn must not reuse tool call ids."""
    if not any(isinstance(b, ToolCallBlock) for b in res.content):
        return res
    return ChatResponse(
        content=[
            b.model_copy(update={"id": f"call_{next(_ids)}"}) if isinstance(b, ToolCallBlock) else b
            for b in res.content
        ],
        is_last=True,
        usage=res.usage,
    )

"""Shared kit of round 175 c (red team on redaction and markers): real OpenAIChatModel against FakeOpenAI, a harnessed Agent,
and readers of what the caller's stream, the final Msg, the report and the model saw."""
from __future__ import annotations

import json
from typing import Any

from agentscope.credential import OpenAICredential
from agentscope.event import (
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallStartEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
)
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import ToolBase, Toolkit
from pydantic import SecretStr
from scripted import make_agent, tool

from agentscope_harness import Harness, HarnessConfig

# built-in OpenAI key shape (sk-proj-...)
OPENAI_KEY = "sk-proj-" + "Zq7Rt2Lm9Xv4Bn8Kp3Wd6Hs1Jc5Fg0Ty7Ue2Io9Pa4"
SECRET_VALUE = "Tr0ub4dor-horse-staple-91"  # an exact secret value (secret_values)


def model(server: Any, stream: bool = True, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model="gpt-test", stream=stream, max_retries=0, retry_delay=0.01,
        client_kwargs={"max_retries": 0, "timeout": 30.0}, **kw,
    )


def agent(config: HarnessConfig, server: Any, tools: list[Any], stream: bool = True, **kw: Any) -> tuple[Harness, Any]:
    h = Harness(config, load_entry_points=False, environ=kw.pop("environ", {}))
    tk = Toolkit(tools=[t if isinstance(t, ToolBase) else tool(t) for t in tools])
    return h, make_agent(model(server, stream=stream), h.instrument(tk), h.middlewares(), **kw)


async def drive(h: Harness, a: Any, prompt: str = "hi", principal: Any = None) -> tuple[list[Any], Msg, Any]:
    events: list[Any] = []
    final = None
    with h.acting_for(principal):
        async for item in a.reply_stream(UserMsg("user", prompt), yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)
    await a.model.client.close()
    return events, final, h.last_report(a)


def streamed_text(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


def streamed_thinking(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ThinkingBlockDeltaEvent))


def streamed_args(events: list[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if isinstance(e, ToolCallDeltaEvent):
            out[e.tool_call_id] = out.get(e.tool_call_id, "") + e.delta
    return out


def streamed_results(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))


def call_names(events: list[Any]) -> list[str]:
    return [e.tool_call_name for e in events if isinstance(e, (ToolCallStartEvent, ToolResultStartEvent))]




def everything_decoded(events: list[Any], final: Any = None, report: Any = None) -> str:
    parts = [json.dumps(e.model_dump(mode="json"), ensure_ascii=False) for e in events]
    if final is not None:
        parts.append(json.dumps(final.model_dump(mode="json"), ensure_ascii=False))
    if report is not None:
        parts.append(json.dumps(report.model_dump(mode="json"), ensure_ascii=False))
    return "\n".join(parts)


def final_text(final: Msg) -> str:
    return "".join(b.text for b in final.content if getattr(b, "type", None) == "text")


def tool_msgs(request: dict[str, Any]) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in request["messages"] if m["role"] == "tool"]


def fragments(secret: str, n: int = 8) -> list[str]:
    """Every run of n characters of the secret (a leak of a fragment counts)."""
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


def leaked(secret: str, text: str, n: int = 8) -> list[str]:
    return [f for f in fragments(secret, n) if f in text]


def text_deltas(*pieces: str) -> list[dict[str, Any]]:
    return [{"content": p} for p in pieces]


def call_deltas(name: str, *arg_pieces: str, index: int = 0, call_id: str = "call_a1") -> list[dict[str, Any]]:
    out = [{"tool_calls": [{"index": index, "id": call_id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}]
    out += [{"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in arg_pieces]
    return out

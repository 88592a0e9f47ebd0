"""Shared kit: a main agent on one FakeOpenAI server, a tool that asks a side
model (AgentScope's real OpenAIChatModel) on a second server for structured output."""
from __future__ import annotations

from typing import Any

from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from pydantic import BaseModel, SecretStr
from server import FakeOpenAI


class Ids(BaseModel):
    ids: list[str]


def model(server: FakeOpenAI, name: str, stream: bool = True, max_retries: int = 0, client_max_retries: int = 0,
          timeout_s: float = 30.0, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("retry_delay", 0.01)
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model=name, stream=stream, max_retries=max_retries,
        client_kwargs={"max_retries": client_max_retries, "timeout": timeout_s}, **kw,
    )


def lookup_tool(side: OpenAIChatModel, payload: str = "rank these", schema: Any = Ids, log: list | None = None):
    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        try:
            res = await side.generate_structured_output([UserMsg("user", f"{payload} {q}")], structured_model=schema)
        except Exception as exc:
            if log is not None:
                log.append(exc)
            return f"not reranked: {type(exc).__name__}: {exc}"
        if log is not None:
            log.append(res)
        return f"best for {q}: {res.content}"
    return lookup

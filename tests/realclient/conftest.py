"""Fixtures for the real-client tests: the scripted OpenAI-compatible server,
AgentScope's real ``OpenAIChatModel`` pointed at it, and a harnessed real
``Agent`` with real async tools.

Two retry loops stack in front of every model call, and both must be set:

* AgentScope's: ``OpenAIChatModel(max_retries=N, retry_delay=s)``
  (``ChatModelBase.__call__``; default 3 retries, 1 s apart). It retries only
  the request (``_call_api``), on ``APIConnectionError``, ``APITimeoutError``,
  ``RateLimitError`` (429) and ``InternalServerError`` (5xx); a stream that
  breaks after its first byte is not retried.
* the ``openai`` client's: ``client_kwargs={"max_retries": M, "timeout": T}``
  (forwarded to ``openai.AsyncClient``; default 2 retries, 600 s timeout,
  backoff 0.5 s x 2^n up to 8 s unless the server sends ``retry-after(-ms)``).

One model call therefore sends up to ``(N + 1) * (M + 1)`` requests: 12 with
the defaults. ``make_model`` sets both to 0 unless a test asks otherwise
(``max_retries=`` for AgentScope's, ``client_max_retries=`` for the
client's); the server answers errors with ``retry-after-ms: 5`` so the
client's own backoff stays short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel
from pydantic import SecretStr
from scripted import make_agent
from server import FakeOpenAI

from agentscope_harness import Harness, HarnessConfig


def build_model(
    server: FakeOpenAI,
    stream: bool = True,
    model: str = "gpt-test",
    max_retries: int = 0,
    client_max_retries: int = 0,
    timeout_s: float = 30.0,
    **kw: Any,
) -> OpenAIChatModel:
    """A real ``OpenAIChatModel`` (real ``openai.AsyncClient``, real HTTP)
    talking to ``server``; ``kw`` goes to ``OpenAIChatModel`` as is."""
    kw.setdefault("retry_delay", 0.01)
    client_kwargs = {"max_retries": client_max_retries, "timeout": timeout_s}
    client_kwargs.update(kw.pop("client_kwargs", {}))
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model=model,
        stream=stream,
        max_retries=max_retries,
        client_kwargs=client_kwargs,
        **kw,
    )


def build_agent(
    config: HarnessConfig, model: OpenAIChatModel, tools: list[Any], **agent_kw: Any,
) -> tuple[Harness, Agent]:
    """A fresh Harness and a real Agent using it, with ``tools`` (async
    functions) as always-permitted ``FunctionTool``s."""
    harness = Harness(config, load_entry_points=False)
    return harness, make_agent(model, tools, middlewares=harness.middlewares(), **agent_kw)


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    """``make_model(server, stream=True, model="gpt-test", max_retries=0, **kw)``;
    the clients it made are closed while the test's loop still runs."""
    made: list[OpenAIChatModel] = []

    def make(server: FakeOpenAI, *args: Any, **kw: Any) -> OpenAIChatModel:
        made.append(build_model(server, *args, **kw))
        return made[-1]

    yield make
    for model in made:
        await model.client.close()


@pytest.fixture
def real_agent() -> Callable[..., tuple[Harness, Agent]]:
    """``real_agent(config, model, tools, **agent_kw) -> (harness, agent)``."""
    return build_agent

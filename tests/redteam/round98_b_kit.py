"""Shared kit, round 98 b: AgentScope's real ``OpenAIChatModel`` (streaming)
against the scripted local server, real tools in a real ``Toolkit``."""
from __future__ import annotations

import json
from typing import Any

from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel
from pydantic import SecretStr
from scripted import make_agent, run
from server import FakeOpenAI

from agentscope_harness import Harness, HarnessConfig, Principal

ALICE = Principal(user_id="u-42", tenant="acme")


def model(server: FakeOpenAI, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
        client_kwargs={"max_retries": 0, "timeout": 10}, **kw,
    )


async def harnessed(server: FakeOpenAI, config: HarnessConfig, tools: list[Any], **kw: Any):
    """One harnessed reply: (harness, agent, events, final)."""
    m = model(server)
    h = Harness(config, load_entry_points=False)
    agent = make_agent(m, tools, middlewares=h.middlewares(), **kw)
    h.instrument(agent.toolkit)
    try:
        with h.acting_for(ALICE):
            events, final = await run(agent, "go")
    finally:
        await m.client.close()
    return h, agent, events, final


async def bare(server: FakeOpenAI, tools: list[Any], **kw: Any):
    m = model(server)
    agent = make_agent(m, tools, **kw)
    try:
        events, final = await run(agent, "go")
    finally:
        await m.client.close()
    return agent, events, final


def sent(server: FakeOpenAI, index: int = -1) -> str:
    """A request's messages as JSON text."""
    return json.dumps(server.requests[index]["messages"], ensure_ascii=False)

"""The status line and token caps through AgentScope's real
``OpenAIChatModel`` (real HTTP, real SSE): asserted on the request bodies
the server logged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.message import UserMsg
from scripted import search
from server import FakeOpenAI, Reply

from agentscope_harness import CostPolicy, HarnessConfig, Ledger, TerminalState, ToolPolicy


def status_lines(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            p.get("text", "") for p in content or [] if isinstance(p, dict)]
        out += [t for t in texts if isinstance(t, str) and "[harness:budget]" in t]
    return out


@pytest.mark.parametrize("stream", [True, False])
async def test_the_status_line_is_in_the_request_body_after_the_soft_limit(
    server: FakeOpenAI, make_model: Any, real_agent: Any, stream: bool,
) -> None:
    server.plan(*[Reply(tool_calls=[("search", {"q": f"q{i}"})]) for i in range(3)], Reply(text="done"))
    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
        ledgers={"retrieval": Ledger(cap=5, soft_at=2)}, max_model_calls=10,
    )
    h, agent = real_agent(config, make_model(server, stream=stream), [search])
    await agent.reply(UserMsg("user", "find kettles"))
    bodies = server.requests
    assert [len(status_lines(b)) for b in bodies] == [0, 0, 1, 1]
    [line] = status_lines(bodies[2])
    assert line == ("<system-reminder>[harness:budget] 8 model calls left · retrieval 3/5 left"
                    "</system-reminder>")
    # written before the call: the 4th request extends the 3rd
    third, fourth = (json.dumps(b["messages"], sort_keys=True) for b in bodies[2:])
    assert fourth.startswith(third[:-1])
    assert h.last_report(agent).prefix_breaks == 0


async def test_a_request_over_the_cap_never_reaches_the_server(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    server.plan(Reply(tool_calls=[("search", {"q": "x" * 4000})]), Reply(text="never"))
    config = HarnessConfig(cost=CostPolicy(max_request_input_tokens=900))
    h, agent = real_agent(config, make_model(server), [search])
    final = await agent.reply(UserMsg("user", "find kettles"))
    assert len(server.requests) == 1
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert final.get_text_content().startswith("I could not finish this request within its budget")

"""Round 142 d (scenarios: error classes). The connection errors and timeouts of
the common HTTP clients keep their class.

README "Use it": `instrument` "keeps a failure's class (`DependencyDown`, a timeout,
a connection error)"; without it "a dependency that went down is neither
`dependency_down` (the run would deliver the model's answer, `completed`) nor
counted by the circuit breaker". "The deadline bounds tools too": "A mutation that
times out (`TimeoutError`: it may have taken effect) is told so to the model".
DESIGN §3: `retry_call` "retries transient errors with backoff ... and raises
`DependencyDown` when it gives up".

Attack: a tool calls a service that refuses connections with aiohttp
(`ClientConnectorError`, an OSError) or requests (`requests.ConnectionError`): no
builtin `ConnectionError`; a mutation posts with requests and times out
(`ReadTimeout`); `retry_call` wraps an httpx request to a closed port.
What happened: plain tool errors (the made-up answer delivered `completed`; "Read
timed out." with no note); `retry_call` made one attempt and raised httpx's error.
"""
from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from agentscope.tool import Toolkit

from agentscope_harness import DependencyDown, Harness, HarnessConfig, TerminalState, ToolPolicy, retry_call
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio
PORT: dict[str, int] = {}


@pytest.fixture(autouse=True)
def ports() -> Iterator[None]:
    """``closed``: a port nobody listens on; ``silent``: one that accepts and never answers."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    PORT["closed"] = probe.getsockname()[1]
    probe.close()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    PORT["silent"] = silent.getsockname()[1]
    try:
        yield
    finally:
        silent.close()


async def fetch_order_aiohttp(order_id: str) -> str:
    """Fetch an order from the orders service.

    Args:
        order_id (str): The order.
    """
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{PORT['closed']}/orders/{order_id}") as resp:
            return await resp.text()


def fetch_order_requests(order_id: str) -> str:
    """Fetch an order from the orders service.

    Args:
        order_id (str): The order.
    """
    return requests.get(f"http://127.0.0.1:{PORT['closed']}/orders/{order_id}", timeout=2).text


@pytest.mark.parametrize("fetch", [fetch_order_aiohttp, fetch_order_requests], ids=["aiohttp", "requests"])
async def test_a_connection_refused_by_a_common_http_client_is_dependency_down(fetch: Any) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls((fetch.__name__, {"order_id": "A-1"})), text("Your order A-1 ships tomorrow.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(fetch)])), h.middlewares())
    _, final = await run(agent, "where is my order A-1?")
    report = h.last_report(agent)
    assert "[harness:dependency_down]" in tool_messages(model.calls[-1])[-1]
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down")
    assert "ships tomorrow" not in (final.get_text_content() or "")


def cancel_order(order_id: str) -> str:
    """Cancel an order at the orders service.

    Args:
        order_id (str): The order.
    """
    return requests.post(f"http://127.0.0.1:{PORT['silent']}/orders/{order_id}/cancel", timeout=0.5).text


async def test_a_mutation_timed_out_by_requests_is_told_it_may_have_taken_effect() -> None:
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1"})), text("I tried to cancel A-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(cancel_order)])), h.middlewares())
    await run(agent, "cancel A-1")
    assert "may have taken effect" in tool_messages(model.calls[-1])[-1]


async def test_retry_call_retries_an_httpx_connection_failure_and_gives_up_with_dependency_down() -> None:
    attempts: list[int] = []

    async def fetch() -> str:
        attempts.append(1)
        async with httpx.AsyncClient() as client:
            return (await client.get(f"http://127.0.0.1:{PORT['closed']}/orders/A-1")).text

    with pytest.raises(DependencyDown):
        await retry_call(fetch, dependency="orders-api", attempts=3, initial_backoff_s=0.01)
    assert len(attempts) == 3


async def test_retry_call_does_not_retry_a_tools_own_error() -> None:
    """The control: an error that is no dependency's is raised at once, as it is."""
    attempts: list[int] = []

    async def parse() -> str:
        attempts.append(1)
        raise ValueError("bad order id")

    with pytest.raises(ValueError):
        await retry_call(parse, dependency="orders-api", attempts=3, initial_backoff_s=0.01)
    assert len(attempts) == 1

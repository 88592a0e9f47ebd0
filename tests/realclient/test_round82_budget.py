"""Red team, round 82, AgentScope's real ``OpenAIChatModel`` against the
local server: attempts cut by the client's own timeout were charged
nothing, though each request reached the provider (three requests of
~1,200 tokens: ``spent_usd=0``); a call cut mid-stream or at the deadline
was charged an estimate without saying so."""

from __future__ import annotations

from typing import Any

import pytest
from scripted import make_agent, run
from server import Reply

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Principal

U42 = Principal(user_id="u-42")
PRICES = {"gpt-test": (1.0, 10.0)}


@pytest.mark.parametrize("answered", [False, True], ids=["all_time_out", "two_time_out_then_answer"])
@pytest.mark.parametrize("stream", [False, True])
async def test_attempts_the_client_gave_up_on_are_charged_their_requests(
    server: Any, make_model: Any, answered: bool, stream: bool,
) -> None:
    """Client timeout 0.3 s, the server answers after 1 s, AgentScope
    retries twice: each attempt's request went out and is charged (an
    estimate, recorded as such), the answered one as reported."""
    server.plan(*[Reply(text="late", delay_s=1.0) for _ in range(2 if answered else 3)],
                Reply(text="on time", usage=(100, 10)))
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices=PRICES)), load_entry_points=False)
    agent = make_agent(make_model(server, stream=stream, max_retries=2, timeout_s=0.3), [],
                       middlewares=h.middlewares())
    with h.acting_for(U42):
        try:
            await run(agent, "when does it ship?")
        except Exception:
            assert not answered  # the provider's failure is raised to the caller (no model_error_text)
    report = h.last_report(agent)
    assert report is not None
    timed_out = 2 if answered else 3
    assert len(server.requests) == 3
    assert report.input_tokens >= timed_out * 100 + (100 if answered else 0)
    assert report.spent_usd > 0
    assert any(d.action == "usage_estimated" for d in report.decisions)


async def test_a_compressions_attempts_the_client_gave_up_on_are_charged(server: Any, make_model: Any) -> None:
    """Round 83: AgentScope's compression call, its three attempts cut by
    the client's timeout (each ~4,500 tokens sent): charged nothing."""
    from server import SUMMARY, _page

    big = dict.fromkeys(SUMMARY, "x" * 4000)
    server.plan(Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
                *[Reply(tool_calls=[("generate_structured_output", big)], usage=(6000, 10), delay_s=1.0)
                  for _ in range(3)],
                *[Reply(text="no", usage=(100, 1)) for _ in range(3)],
                Reply(text="Here is the page summary.", usage=(1000, 10)))
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices=PRICES)), load_entry_points=False)
    agent = make_agent(make_model(server, stream=False, context_size=4000, max_retries=2, timeout_s=0.3), [_page],
                       middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "summarise http://x")
    report = h.last_report(agent)
    assert report is not None
    assert report.input_tokens > 1000 + 3 * 100 + 1000 + 3 * 3000  # the three cut attempts' requests too
    assert any(d.action == "usage_estimated" for d in report.decisions)


async def test_attempts_that_never_connected_are_charged_nothing() -> None:
    """Round 83: a connect that times out sent nothing (httpx's
    ``ConnectTimeout``, wrapped by the SDK as ``APITimeoutError``): it was
    charged as a request that went out, and the report said so."""
    import socket

    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):  # the backlog filled: a connect hangs
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=10.0, prices=PRICES)), load_entry_points=False)
        model = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk"),
                                                            base_url=f"http://127.0.0.1:{port}/v1"),
                                model="gpt-test", stream=False, max_retries=2, retry_delay=0.01,
                                client_kwargs={"max_retries": 0, "timeout": 0.3})
        agent = make_agent(model, [], middlewares=h.middlewares())
        import openai

        with h.acting_for(U42), pytest.raises(openai.APITimeoutError):
            await run(agent, "when does my order ship?")
        report = h.last_report(agent)
        assert report is not None
        assert (report.input_tokens, report.spent_usd) == (0, 0.0)
        await model.client.close()
    finally:
        for sock in (listener, *fillers):
            sock.close()

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

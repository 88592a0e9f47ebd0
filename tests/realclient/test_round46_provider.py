"""Red team, round 46, AgentScope's real ``OpenAIChatModel`` against a
misbehaving local server: a usage report with negative counts, and a
deadline that cuts a stream in the middle of a secret."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.event import TextBlockDeltaEvent, ThinkingBlockDeltaEvent
from agentscope.message import Msg
from scripted import make_agent, run
from server import Reply

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Principal, TerminalState

U42 = Principal(user_id="u-42")
KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4"


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"results for {q}"


async def _reply(h: Harness, agent: Any) -> tuple[list[Any], Msg | None]:
    with h.acting_for(U42):
        return await run(agent, "find kettles")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_a_negative_usage_report_is_no_credit(server: Any, make_model: Any, stream: bool) -> None:
    """README 'Spends no more than it may'. The first answer reports
    -4,000,000 prompt tokens (a broken proxy); every later one 3,000 in and
    200 out ($0.0095 at $2.50/$10). Charged as reported it was -$10 of
    credit: a $0.02 cap let 12 more calls through. It is charged an estimate
    (``usage_estimated``) and the cap stops the run after its third call."""
    server.plan(Reply(tool_calls=[("search", {"q": "kettle 0"})], usage=(-4_000_000, 0)))
    server.plan(*[Reply(tool_calls=[("search", {"q": f"kettle {i}"})], usage=(3000, 200)) for i in range(1, 12)])
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.02, prices={"gpt-test": (2.5, 10.0)})),
                load_entry_points=False)
    agent = make_agent(make_model(server, stream=stream), [search], middlewares=h.middlewares())
    await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")
    assert len(server.requests) <= 3
    assert report.spent_usd > 0
    assert "usage_estimated" in [d.action for d in report.decisions]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_a_usage_of_no_tokens_is_no_free_ride(server: Any, make_model: Any, stream: bool) -> None:
    """Round 47, README 'No usage, no free ride': a proxy that reports 0
    tokens in and out for every call ran nine calls at $0 against a $0.02
    cap. Every request has a prompt: such a usage is no report, and the
    estimate is charged."""
    server.plan(*[Reply(tool_calls=[("search", {"q": f"kettle {i} " + "x" * 4000})], usage=(0, 0)) for i in range(12)])
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.01, prices={"gpt-test": (2.5, 10.0)})),
                load_entry_points=False)
    agent = make_agent(make_model(server, stream=stream), [search], middlewares=h.middlewares())
    await _reply(h, agent)
    report = h.last_report(agent)
    assert report.spent_usd > 0 and "usage_estimated" in [d.action for d in report.decisions]
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_an_infinite_usage_count_is_charged_an_estimate(server: Any, make_model: Any, stream: bool) -> None:
    """Round 47: ``"prompt_tokens": Infinity`` (Python's json reads it) made
    ``int(inf)`` raise and the reply fail; AgentScope's own events take
    finite counts only. The estimate stands in for it: the run goes on,
    charged, to its end (here the stall detector's: nothing new is found)."""
    server.plan(*[Reply(tool_calls=[("search", {"q": f"kettle {i}"})], usage=(float("inf"), 0)) for i in range(12)])
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.02, prices={"gpt-test": (2.5, 10.0)})),
                load_entry_points=False)
    agent = make_agent(make_model(server, stream=stream), [search], middlewares=h.middlewares())
    await _reply(h, agent)
    report = h.last_report(agent)
    assert report.terminal_state is not TerminalState.FAILED, report.reason
    assert len(server.requests) > 2
    assert 0 < report.spent_usd < 0.02 and "usage_estimated" in [d.action for d in report.decisions]


@pytest.mark.parametrize("field", ["content", "reasoning_content"], ids=["text", "thinking"])
async def test_a_deadline_cut_never_shows_the_opening_of_a_secret(server: Any, make_model: Any, field: str) -> None:
    """README: secrets are redacted from streams; a stream holds back only
    what could still become a secret. The model streams ``Token:
    sk-proj-A1b2C3d4E5`` and the provider hangs past the 1 s deadline: what
    was held back (too short yet to be judged a key) was sent at the cut,
    followed by the stop text. It is dropped; the stop text still follows."""
    prefix = "Token: "
    # the role chunk, then 5 pieces of 5 characters: "Token: sk-proj-A1b2C3d4E5"
    server.plan(Reply(text=prefix + KEY, stall_after=6, reasoning=field == "reasoning_content"))
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    agent = make_agent(make_model(server), [search], middlewares=h.middlewares())
    events, final = await _reply(h, agent)
    assert (h.last_report(agent).terminal_state, h.last_report(agent).reason) == (TerminalState.INCOMPLETE, "deadline")
    shown = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent | ThinkingBlockDeltaEvent))
    assert "sk-proj" not in shown and "A1b2" not in shown, shown
    assert "I could not complete this request" in shown
    assert final is not None and "sk-proj" not in (final.get_text_content() or "")

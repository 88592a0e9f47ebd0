"""Round 138 b (scenarios, README "Configuration": `deadline_s` "bounds every model call,
store call, async hook"; hook 2: past the deadline, "the fallback answer ... without a
model call").

Attack: `deadline_s=0.5` and an async `pre_think` observer after the watchdog's check (a
slow audit service) that takes 3 s: it is cut at the deadline and fails open; the model
call comes next, past the deadline. What happened: the call was made anyway (an instant
model answered and the run ended `completed`); with AgentScope's real `OpenAIChatModel`
it was cut by a 0 s timer before any request went out, yet counted and charged. Should:
not made, nor charged; `incomplete` (`deadline`) with the fallback answer.
"""
from __future__ import annotations

import asyncio

import pytest
from agentscope.message import UserMsg
from scripted import make_agent
from server import Reply
from side_kit import model as real_model

from agentscope_harness import CostPolicy, Harness, HarnessConfig, InjectionVerdict, TerminalState, harness_hook
from agentscope_harness.testing import ScriptedModel, text

pytestmark = pytest.mark.asyncio


@harness_hook("pre_think", priority=30, name="slow_audit_log", kind="observer")
async def slow_audit_log(ctx) -> None:
    await asyncio.sleep(3)  # ships a line to a slow audit service (fails open)


@pytest.mark.parametrize("client", ["scripted", "openai"])
async def test_a_model_call_reached_past_the_deadline_is_not_made(server, client: str) -> None:
    server.plan(Reply(text="the answer"))
    model = ScriptedModel([text("the answer")]) if client == "scripted" else real_model(server, "gpt-test")
    h = Harness(HarnessConfig(deadline_s=0.5, cost=CostPolicy(cap_usd=1.0, prices={"gpt-test": (0.15, 0.6),
                                                                                      "scripted": (0.15, 0.6)})),
                hooks=[slow_audit_log], load_entry_points=False, environ={})
    agent = make_agent(model, [], h.middlewares())
    said = (await agent.reply(UserMsg("user", "hi"))).get_text_content() or ""
    report = h.last_report(agent)
    sent = len(model.calls) if client == "scripted" else len(server.requests)
    assert (sent, report.model_calls, report.spent_usd) == (0, 0, 0.0)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert "the answer" not in said


async def test_a_detectors_verdict_is_public() -> None:
    """`injection_detector` takes "your classifier (the `InjectionDetector` protocol)",
    whose `score` returns an `InjectionVerdict`: importable from the package."""
    assert InjectionVerdict(score=0.9, signals=["mine"]).flagged

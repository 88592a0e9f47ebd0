"""Round 153 c (scenarios: a support bot's week, workers restarted between replies and in
the middle of parks; about 14 held).

README "Ask a human": a reader that stops at the question and closes the stream "leaves
the reply parked as at its end"; "Save the agent's state once its reply stream has ended
or was closed". Attack: a web handler streams to the question, `await stream.aclose()`,
saves the state; the human's yes reaches a fresh worker at once. Seen: AgentScope closes
the reply's layers late, in a task, so the park was recorded a loop turn after `aclose()`
returned: the saved state named no park, the fresh worker read no record (`resume_unverified`)
and refused the approved refund (`approval_mismatch`). A README limit (strict xfails): a
park recorded as its question is streamed was tried and withdrawn (round 154 a: the close's
second record let another worker run the same approval again). Saved once the stream was
read to its end, it resumes (the control).
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import TerminalState, ToolPolicy
from tests.redteam.park_kit import charge_tool, instrumented, pay_model, resumed, worker
from tests.redteam.test_redteam_round131_second_question_answered_at_once import REFUNDED, refund
from tests.scripted import (
    ALICE,
    ScriptedModel,
    calls,
    client_result,
    confirm,
    drain,
    make_agent,
    text,
    tool,
    until_question,
)

pytestmark = pytest.mark.asyncio

ASKS = {"refund": ToolPolicy(role="mutation", ask_when=lambda a: "refunds need a human")}


def refunding(path: str) -> tuple[ScriptedModel, Any, Any]:
    """A worker on the SQLite file ``path`` whose refunds need a human, its agent, and the model."""
    REFUNDED.clear()
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("Refunded A-1."), text("x")])
    a = worker(path, tools=ASKS)
    return model, a, make_agent(model, a.instrument(Toolkit(tools=[tool(refund)])), a.middlewares())


def fresh_worker(path: str, model: ScriptedModel, saved: str) -> tuple[Any, Any]:
    """A worker restarted on ``path``, and the agent it rebuilds from the saved state."""
    b = worker(path, tools=ASKS)
    return b, resumed(model, b, b.instrument(Toolkit(tools=[tool(refund)])), saved)


LIMIT = pytest.mark.xfail(strict=True, reason="README limit: a state saved right after aclose() names no park yet")


@LIMIT
async def test_a_state_saved_right_after_aclose_resumes_on_a_fresh_worker_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "fleet.db")
    model, a, first = refunding(path)
    with a.acting_for(ALICE):
        stream, asked = await until_question(first, UserMsg("user", "refund A-1"), RequireUserConfirmEvent,
                                             close=False)
        await stream.aclose()
    saved = first.state.model_dump_json()  # at once, as a web handler does
    assert "agentscope_harness.park" in saved
    b, second = fresh_worker(path, model, saved)
    with b.acting_for(ALICE):
        await drain(second, confirm(asked, asked.tool_calls[0]))
    report = b.last_report(second)
    assert REFUNDED == ["A-1"], [(d.hook, d.action, d.detail) for d in report.decisions]
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")


@pytest.mark.xfail(strict=False, reason="README limit; on a loaded machine the close's record may land first")
async def test_a_call_still_running_at_the_saved_question_is_made_once(tmp_path: Path) -> None:
    """The charge of the question's batch still runs when the state is saved and the
    client's result reaches a fresh worker at once: made again there (not strict: with
    the machine loaded by other test runs, it was made once in one run of about thirty)."""
    card: list[tuple[str, int]] = []
    path = str(tmp_path / "fleet.db")
    model = pay_model()
    a = worker(path, timeout_s=0.3)
    first = make_agent(model, instrumented(a, charge_tool(card)), a.middlewares())
    with a.acting_for(ALICE):
        stream, asked = await until_question(first, UserMsg("user", "pay order A-1"), close=False)
        saved = first.state.model_dump_json()
        await stream.aclose()
    b = worker(path, timeout_s=0.3)
    second = resumed(model, b, instrumented(b, charge_tool(card)), saved)
    with b.acting_for(ALICE):
        await drain(second, client_result(asked))
    await asyncio.sleep(1.5)  # 3x the charge: every run of it has ended
    assert card == [("A-1", 80)]


async def test_a_run_resumed_on_a_fresh_worker_counts_the_humans_wait_in_wall_s(tmp_path: Path) -> None:
    """README "What the caller receives": "A resumed run's `wall_s` runs from its first
    reply (the human's wait included)". Resumed on a fresh worker 1 s after its park, the
    report said the resume's own 0.01 s (the start was this process's clock): the park
    record carries the run's start in wall-clock time."""
    path = str(tmp_path / "fleet.db")
    model, a, first = refunding(path)
    with a.acting_for(ALICE):
        items = await drain(first, UserMsg("user", "refund A-1"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    saved = first.state.model_dump_json()
    await asyncio.sleep(1.0)  # the human decides
    b, second = fresh_worker(path, model, saved)
    with b.acting_for(ALICE):
        await drain(second, confirm(asked, asked.tool_calls[0]))
    report = b.last_report(second)
    assert REFUNDED == ["A-1"] and report.terminal_state is TerminalState.COMPLETED
    assert 1.0 <= report.wall_s < 10, report.wall_s

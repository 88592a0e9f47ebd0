"""Red team, round 37, a newcomer on AgentScope's real ``OpenAIChatModel``
against a local OpenAI-compatible server: an answer that says nothing, and an
async ``on_system_prompt`` hook slower than the run's deadline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import Msg
from scripted import make_agent, run
from server import Reply

from agentscope_harness import Harness, HarnessConfig, HookContext, Principal, TerminalState, ToolPolicy, harness_hook

U42 = Principal(user_id="u-42")


async def cancel_order(order_id: str, user_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    return f"order {order_id} cancelled"


def _sentinel_only(body: dict[str, Any]) -> str:
    """A model that ignores the refusal and says back only its sentinel."""
    told = next(m["content"] for m in body["messages"] if m["role"] == "tool")
    return told.split("]")[0] + "]"  # "[harness:permission_denied]"


async def _reply(h: Harness, agent: Any) -> tuple[list[Any], Msg | None]:
    with h.acting_for(U42):
        return await run(agent, "cancel order A-1")


@pytest.mark.parametrize("script", [
    [Reply(text=None)],
    [Reply(tool_calls=[("cancel_order", {"order_id": "A-1", "user_id": "u-9"})]), Reply(text=_sentinel_only)],
], ids=["the provider's empty completion", "only the sentinel said back"])
async def test_an_answer_that_says_nothing_is_not_completed(server: Any, make_model: Any, script: list[Reply]) -> None:
    """README 'What the caller receives': ``completed`` (``answered``) is
    the model's text, audited. Nothing left once audited is no answer: the
    run ends ``incomplete`` (``no_answer``) and the user, in the final
    message and the stream, gets the fallback answer (they had got '')."""
    server.plan(*script)
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})}),
                load_entry_points=False)
    agent = make_agent(make_model(server), [cancel_order], middlewares=h.middlewares())
    events, final = await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "no_answer")
    assert final is not None
    answer = final.get_text_content() or ""
    assert answer.startswith("I could not complete this request (no answer was given)")
    assert "[harness:" not in answer
    shown = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert answer in shown


async def test_a_plain_answer_is_still_completed(server: Any, make_model: Any) -> None:
    """Regression guard: a one-word answer is an answer."""
    server.plan(Reply(text="Done."))
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(make_model(server), [cancel_order], middlewares=h.middlewares())
    _, final = await _reply(h, agent)
    assert (h.last_report(agent).terminal_state, final.get_text_content()) == (TerminalState.COMPLETED, "Done.")


@harness_hook("on_system_prompt", priority=60, name="tenant_rules", kind="transform")
async def tenant_rules(ctx: HookContext) -> None:
    """A tenant's house rules for the prompt, from a slow database."""
    await asyncio.sleep(4)
    ctx.prompt_addition.append("House rules: be brief.")


async def test_an_async_system_prompt_hook_is_bounded_by_the_runs_deadline(server: Any, make_model: Any) -> None:
    """README 'Configuration': ``deadline_s`` bounds every async hook. The
    prompt's hooks ran in a scratch run without one: 4 s under 1 s."""
    server.plan(Reply(text="A red mug."), Reply(text="A blue mug."))
    h = Harness(HarnessConfig(deadline_s=1.0), hooks=[tenant_rules], load_entry_points=False)
    agent = make_agent(make_model(server), [], middlewares=h.middlewares())
    started = time.monotonic()
    _, final = await _reply(h, agent)
    assert time.monotonic() - started < 2.0
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert final is not None and "time allowed" in (final.get_text_content() or "")

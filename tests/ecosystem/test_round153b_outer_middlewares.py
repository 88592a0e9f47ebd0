"""Round 153 b (scenarios: "Combining with AgentScope's built-in middlewares"; about 12
held, four end to end with AgentScope's real `OpenAIChatModel`).

1. README "Combining", Order: the harness "never overrides a `tool_choice` an outer
   middleware forced". A user's middleware placed first forced `required` (or one tool,
   on a thinking model) every round; once the ladder constrained the run, the model
   guard turned it into `none` (or `auto`), taking it for its own narrowing. It now
   touches only the choice the harness set (`RunState.harness_choice`).
2. DESIGN §3.1 `refusals` counts refusals by code. A guard placed first that answers the
   permission check itself (an allow-list) left every call unjudged: each was refused
   `[harness:policy_error] ... was not judged` but the report said `refusals == {}` and no
   decision named them. Each is now a `policy_error` refusal of `tool_adapter`.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.middleware import MiddlewareBase
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolChoice
from pydantic import BaseModel

from agentscope_harness import Harness, HarnessConfig, TerminalState
from tests.scripted import RAN, ScriptedModel, calls, make_agent, run, search

pytestmark = pytest.mark.asyncio


class ForceChoice(MiddlewareBase):
    """A user's policy placed first: every round must call a tool (or ``mode``, that tool)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        input_kwargs["tool_choice"] = ToolChoice(mode=self.mode)
        async for event in next_handler(**input_kwargs):
            yield event


class AllowList(MiddlewareBase):
    """A user's guard placed first that answers the permission check itself (for ``tool``)."""

    def __init__(self, tool: str = "search") -> None:
        self.tool = tool

    async def on_check_permission(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if input_kwargs["tool"].name == self.tool:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allow-listed")
        return await next_handler(**input_kwargs)


class Thinking(ScriptedModel):
    class Parameters(BaseModel):
        thinking_enable: bool = True


@pytest.mark.parametrize("mode, thinking", [("required", False), ("search", True)])
async def test_an_outer_middlewares_forced_choice_is_sent_as_forced(mode: str, thinking: bool) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False, environ={})
    model = (Thinking if thinking else ScriptedModel)([calls(("search", {"q": "same"}))], repeat=True)
    if thinking:
        model.parameters = Thinking.Parameters()
    agent = make_agent(model, [search], [ForceChoice(mode), *h.middlewares()], max_iters=40)
    await run(agent, "go")
    report = h.last_report(agent)
    assert report.reason == "stalled" and any(d.action == "constrain" for d in report.decisions)
    assert {getattr(c.tool_choice, "mode", c.tool_choice) for c in model.calls} == {mode}


async def test_calls_a_guard_before_the_harness_answered_for_are_refusals_in_the_report() -> None:
    RAN.clear()
    h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False, environ={})
    queries = iter(range(100))
    model = ScriptedModel(lambda turn: calls(("search", {"q": f"q{next(queries)}"})))
    agent = make_agent(model, [search], [AllowList(), *h.middlewares()], max_iters=40)
    await run(agent, "go")
    report = h.last_report(agent)
    read = [c.last_result for c in model.calls[1:]]
    assert RAN == [] and len(read) > 1 and all("not judged" in r for r in read), read
    refused = [d for d in report.decisions if d.code == "policy_error"]
    assert report.refusals == {"policy_error": len(refused)} and len(refused) >= len(read), report.refusals
    assert {(d.hook, d.tool) for d in refused} == {("tool_adapter", "search")}
    assert all("not judged" in d.detail for d in refused)
    # round 154 a: met again with nothing new, they climb the refusal ladder as any refusal does
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:policy_error")
    assert report.model_calls <= 4, report.model_calls

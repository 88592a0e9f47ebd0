"""The deadline at its edges, found by the red team: shadow mode giving way
to it wherever time runs out, a structured reply whose finishing tool ended
past it, and a resumed sub-agent's time (counted from the resume, bounded by
the run resuming it, not by a parent settled meanwhile)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentscope.message import UserMsg
from pydantic import BaseModel
from scripted import RAN, ScriptedModel, calls, make_agent, parking_tools, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ToolPolicy

FALLBACK_DEADLINE = HarnessConfig().fallback_text.format(reason="the time allowed for it ran out")
AGENTSCOPE_CAP = "The maximum reasoning-acting iterations are exceeded."


class SlowProvider(ScriptedModel):
    """A provider that takes ``delay`` seconds per call."""

    delay = 0.3

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super()._call_api(*args, **kwargs)


async def look(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    await asyncio.sleep(0.05)
    return f"result {q}"


async def test_shadow_mode_cut_in_a_model_call_ends_as_the_deadlines_after_an_unenforced_stop() -> None:
    """The call limit is recorded (shadow mode does not enforce it); the
    deadline then passes during a model call: the run ends as the
    deadline's, not with the call limit's answer."""
    h = Harness(HarnessConfig(mode="shadow", max_model_calls=1, deadline_s=1.0, wrap_up_s=0), load_entry_points=False)
    agent = make_agent(SlowProvider([calls(("look", {"q": str(i)})) for i in range(10)]), [look], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert (final.get_text_content() or "").startswith(FALLBACK_DEADLINE)


async def test_shadow_mode_a_budget_asking_for_more_gives_way_to_the_deadline() -> None:
    """A budget spent with ``on_exhausted="ask"`` (not enforced in shadow
    mode) left the watchdog silent: every model call after the deadline was
    made and cut, up to AgentScope's iteration cap."""
    cost = CostPolicy(cap_usd=0.0001, prices={"scripted": (1000.0, 0.0)}, on_exhausted="ask")
    h = Harness(HarnessConfig(mode="shadow", cost=cost, deadline_s=0.5, wrap_up_s=0), load_entry_points=False)
    asked: list[float] = []
    started = time.monotonic()

    def turn(record: dict[str, Any]) -> Any:
        asked.append(time.monotonic() - started)
        return calls(("look", {"q": f"x{len(asked)}"}))

    agent = make_agent(ScriptedModel([turn], repeat=True), [look], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert len([t for t in asked if t > 0.5]) <= 1 and len(asked) < 15
    assert (final.get_text_content() or "").startswith(FALLBACK_DEADLINE)


async def test_a_structured_reply_whose_finishing_tool_ends_past_the_deadline_is_not_asked_again() -> None:
    """The finishing tool delivered just past the deadline (within the
    grace); the structured output it still owed cannot be had in time: the
    reply ended after AgentScope asked for it to its iteration cap, every
    call cut, with AgentScope's own message."""

    class Verdict(BaseModel):
        answer: str

    async def submit(answer: str) -> str:
        """Deliver the final answer.

        Args:
            answer (str): The answer.
        """
        await asyncio.sleep(0.55)
        return "delivered"

    h = Harness(HarnessConfig(deadline_s=0.5, wrap_up_s=0, tools={"submit": ToolPolicy(role="finish")}),
                load_entry_points=False)
    model = ScriptedModel([calls(("submit", {"answer": "the red mug"}))], repeat=True)
    agent = make_agent(model, [submit], h.middlewares())
    final = await agent.reply(UserMsg("user", "which mug?"), structured_schema=Verdict)
    assert (final.get_text_content() or "") != AGENTSCOPE_CAP
    assert len(model.calls) <= 2
    assert len(h.last_report(agent).decisions) < 20


def _parking_child(deadline_s: float) -> tuple[Harness, Any]:
    """A researcher on its own Harness whose first search waits for a human."""
    ask_first = ToolPolicy(role="retrieval", ask_when=lambda args: "a human" if args.get("q") == "o1" else None)
    h = Harness(HarnessConfig(deadline_s=deadline_s, tools={"search": ask_first}), load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("search", {"q": "o1"})), calls(("search", {"q": "more"})),
                                      text("child done")]), [search], h.middlewares(), name="researcher")
    return h, child


async def _lead(h: Harness, tool: Any) -> None:
    lead = make_agent(ScriptedModel([calls((tool.__name__, {"task": "go"})), text("lead done")]), [tool],
                      h.middlewares(), name="lead")
    await run(lead)


async def _park_then_resume(child_deadline_s: float, first_lead: HarnessConfig, park_s: float,
                            second_lead: HarnessConfig) -> Any:
    child_h, child = _parking_child(child_deadline_s)
    delegate, resume, _ = parking_tools(child)

    await _lead(Harness(first_lead, load_entry_points=False), delegate)
    assert child_h.last_report(child).terminal_state.value == "waiting_input"
    await asyncio.sleep(park_s)
    await _lead(Harness(second_lead, load_entry_points=False), resume)
    return child_h.last_report(child)


async def test_a_resumed_sub_agents_wrap_up_window_counts_from_the_resume() -> None:
    """Its time runs from the resume: the park counted as time it had, so
    its default window covered all it was left and it ended ``stalled``."""
    report = await _park_then_resume(10.0, HarnessConfig(), 2.5, HarnessConfig(deadline_s=0.4))
    assert RAN == ["o1", "more"]
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert not [d for d in report.decisions if d.action == "constrain"]


async def test_a_resumed_sub_agent_is_not_bounded_by_a_parent_settled_meanwhile() -> None:
    """The lead that started it has ended (its deadline long past); the run
    resuming it has time: the approved call runs."""
    report = await _park_then_resume(10.0, HarnessConfig(deadline_s=0.5), 0.7, HarnessConfig(deadline_s=30.0))
    assert RAN == ["o1", "more"]
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")


async def test_shadow_mode_reports_an_ask_tool_past_the_deadline_as_enforce_mode_does() -> None:
    """Red team: the ``ask`` tool asked the user, then time ran out before
    the model relayed it. Shadow mode let the deadline override that end, so
    its report no longer said what enforce mode does for the same run."""

    async def ask_user(question: str) -> str:
        """Ask the user.

        Args:
            question (str): The question.
        """
        await asyncio.sleep(0.55)
        return "asked"

    ends = []
    for mode in ("enforce", "shadow"):
        h = Harness(HarnessConfig(mode=mode, deadline_s=0.5, wrap_up_s=0, tools={"ask_user": ToolPolicy(role="ask")}),
                    load_entry_points=False)
        model = ScriptedModel([calls(("ask_user", {"question": "Which colour?"})), text("Which colour?")])
        agent = make_agent(model, [ask_user], h.middlewares())
        _, final = await run(agent)
        report = h.last_report(agent)
        ends.append((report.terminal_state.value, report.reason, final.get_text_content()))
    assert ends == [("waiting_input", "asked_user", "Which colour?")] * 2


async def test_an_ask_tools_question_reaches_the_user_when_time_runs_out_before_the_model_relays_it() -> None:
    """The ``ask`` tool asked the user within the deadline; the model call
    that would relay the question was cut by it. The report said
    ``waiting_input`` while the user received the deadline's apology: the
    question never reached them. It is the tool's one text argument."""

    async def ask_user(question: str) -> str:
        """Ask the user.

        Args:
            question (str): The question.
        """
        return "asked"

    h = Harness(HarnessConfig(deadline_s=0.5, wrap_up_s=0, tools={"ask_user": ToolPolicy(role="ask")}),
                load_entry_points=False)
    model = SlowProvider([calls(("ask_user", {"question": "Which colour?"})), text("Which colour, please?")])
    model.delay = 0.3
    agent = make_agent(model, [ask_user], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("waiting_input", "asked_user")
    assert final.get_text_content() == "Which colour?"


async def test_an_ask_tools_question_reaches_the_user_when_the_relaying_call_is_refused() -> None:
    """The same end when the call that would relay the question is refused
    (here: over ``max_request_input_tokens``, the question itself is long):
    the question, not the budget's apology."""

    async def ask_user(question: str) -> str:
        """Ask the user.

        Args:
            question (str): The question.
        """
        return "asked"

    question = "Which of these colours? " + "teal, " * 3000
    cost = CostPolicy(max_request_input_tokens=4000)
    h = Harness(HarnessConfig(cost=cost, tools={"ask_user": ToolPolicy(role="ask")}), load_entry_points=False)
    model = ScriptedModel([calls(("ask_user", {"question": question})), text("never sent")])
    agent = make_agent(model, [ask_user], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("waiting_input", "asked_user")
    assert len(model.calls) == 1
    assert final.get_text_content() == question

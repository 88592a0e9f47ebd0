"""Red team, round 14: today's commits attacked from a user's side.

1. re-nesting and re-timing (fdf785c): ``lifecycle.rejoin`` for a run the
   tool adapter opened alone, ``nest_on_resume``'s refresh inside a live
   lead, a grandchild's report adopted by the lead (``_adopted``);
2. made-up answers (1052d12): ``answer_made_up`` after ``another_round``,
   a structured output made beside the call whose dependency goes down, a
   structured reply whose finishing tool completed;
3. the model call's unarmed first step and its stop text (b029c52, b87326d).

Real ``Agent``s, real tools in real ``Toolkit``s, the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentscope.event import (
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
)
from agentscope.message import Msg, ToolResultBlock, ToolResultState, UserMsg
from agentscope.tool import FunctionTool, Toolkit
from hookkit import (
    Ran,
    client_tool,
    down_shop,
    drive,
    every_event,
    harnessed,
    refunding,
    searcher,
    shop_tools,
    streamed,
    structured_reply,
)
from pydantic import BaseModel
from scripted import ALLOW, ScriptedModel, calls, delegating_tool, make_agent, parking_tools, text
from scripted import tool as allowed

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy, harness_hook, remaining_time

FALLBACK = "I could not complete this request ({reason}). Please try again, or narrow the request down."
MADE_UP = "All 12 units are in stock!"


# ====================================================== 1. re-timing a resumed run (fdf785c)


@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_run_parked_on_a_client_executed_call_is_timed_again_after_the_result(adapters: str) -> None:
    """README: a run the tool adapter opens alone "parked on a human, it is
    timed again from the next call after the resume, as a reply is"; parked
    on "confirmation, outside answer, budget question"; "a human's wait is
    not the agent's time". deadline_s=1.0; the client answers 1.3 s later;
    the model's next search must run."""
    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    mws = h.middlewares()
    model = ScriptedModel([calls(("search", {"q": "first"})), calls(("client_lookup", {"order_id": "A-1"})),
                           calls(("search", {"q": "after the client"})), text("done")], model="m")
    agent = make_agent(model, Toolkit(tools=[client_tool(), allowed(searcher(ran))]),
                       mws if adapters == "both" else mws[1:], name="a")
    events = [e async for e in agent.reply_stream(UserMsg("user", "look up A-1"))]
    call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    await asyncio.sleep(1.3)  # the client (a human's device) takes its time
    result = ToolResultBlock(id=call.id, name="client_lookup", output="order A-1: paid", state=ToolResultState.SUCCESS)
    said = [e async for e in agent.reply_stream(
        ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[result]), yield_final_msg=True,
    ) if isinstance(e, Msg)]
    assert said and said[-1].get_text_content() == "done"
    assert [a["q"] for a in ran.of("search")] == ["first", "after the client"], model.calls[-1].last_result


def _parked_child(h_child: Harness, ran: Ran, seen: list[float | None]) -> Any:
    """A sub-agent with the tool adapter alone whose refund waits on a human,
    then probes how much time it has and searches."""

    async def probe(step: str) -> str:
        """Probe the time left.

        Args:
            step (str): The step.
        """
        seen.append(remaining_time())
        return f"probed {step}"

    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), calls(("probe", {"step": "after"})),
                           calls(("search", {"q": "child"})), text("child done")], model="c")
    return make_agent(model, [refunding(ran), probe, searcher(ran)], h_child.middlewares()[1:], name="child")


async def test_a_tool_only_sub_agent_resumed_in_its_live_lead_gets_no_more_time_than_the_lead() -> None:
    """rejoin re-times a resumed run from now with its own deadline_s (60 s
    here), "no later than a live lead's": resumed by its live lead (3 s),
    the sub-agent's tools read at most the lead's time."""
    ran, seen = Ran(), []
    child = _parked_child(Harness(HarnessConfig(deadline_s=60), load_entry_points=False), ran, seen)
    delegate, resume, asks = parking_tools(child)
    h = Harness(HarnessConfig(deadline_s=3.0), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), calls(("resume", {"task": "go"})),
                                     text("lead done")], model="l"), [delegate, resume], h.middlewares(), name="lead")
    _, final, _ = await drive(h, lead)
    assert len(asks) == 1 and ran.of("refund") == [{"order_id": "A-1"}]
    assert len(seen) == 1 and seen[0] is not None and seen[0] <= 3.0, seen


async def test_a_sub_agent_resumed_in_its_live_lead_still_spends_the_leads_ledger() -> None:
    """nest_on_resume now re-nests a run in its own live parent on every
    resume: the refresh must leave a normally nested sub-agent on its lead's
    ledger. One Harness, retrieval ledger of 1: the lead's search spends it;
    the sub-agent, resumed in the same lead reply, may search no more."""
    ran, seen = Ran(), []
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                              ledgers={"retrieval": Ledger(cap=1)}), load_entry_points=False)
    child = _parked_child(h, ran, seen)
    delegate, resume, asks = parking_tools(child)
    lead = make_agent(ScriptedModel([calls(("search", {"q": "lead"})), calls(("delegate", {"task": "refund"})),
                                     calls(("resume", {"task": "go"})), text("lead done")], model="l"),
                      [delegate, resume, searcher(ran)], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(asks) == 1 and ran.of("refund") == [{"order_id": "A-1"}] and len(seen) == 1
    assert [a["q"] for a in ran.of("search")] == ["lead"], ran


SECRET = "hunter2-super-secret-value-XYZ"


async def test_a_grandchilds_stop_reason_quoting_the_leads_secret_is_scrubbed_in_the_leads_report() -> None:
    """_adopted scrubs a child report with the lead's secrets, recursively:
    a grandchild (a third team's Harness) stops with a reason and a decision
    detail quoting the lead's secret; the middle Harness knows no secret.
    Neither the lead's report nor what it streams may carry it."""

    @harness_hook("post_tool_call", name="leaky_stop")
    def leaky_stop(ctx: Any) -> None:
        ctx.decide("note", detail=f"upstream key {SECRET}")
        ctx.stop(f"blocked: upstream key {SECRET}")

    ran = Ran()
    grand_h = Harness(HarnessConfig(), hooks=[leaky_stop], load_entry_points=False)
    grandchild = make_agent(ScriptedModel([calls(("search", {"q": "x"})), text("never")], model="g"),
                            [searcher(ran)], grand_h.middlewares(), name="grandchild")
    middle_h = Harness(HarnessConfig(), load_entry_points=False)
    middle = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("middle done")], model="m"),
                        [delegating_tool(grandchild)], middle_h.middlewares(), name="middle")
    published: list[Any] = []
    h = Harness(HarnessConfig(secret_values=[SECRET], on_report=published.append), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegating_tool(middle)], h.middlewares(), name="lead")
    events, final, report = await drive(h, lead)
    [mid] = report.children
    assert [c.agent for c in mid.children] == ["grandchild"]
    assert SECRET not in json.dumps(report.model_dump(mode="json"))
    assert SECRET not in json.dumps([r.model_dump(mode="json") for r in published])
    assert SECRET not in every_event(events)


# ====================================================== 2. made-up answers (1052d12)


async def test_an_honest_finish_after_a_replaced_text_answer_and_another_round_stands() -> None:
    """The inventory goes down; the model answers text (made up): the
    finishing tool is required, so terminal_enforcer grants another round,
    where the model submits an honest answer. answer_made_up must not be
    set by the first round: the finishing tool's answer is delivered,
    ``completed``, and the made-up text never streams."""
    honest = "The inventory service is down, so I cannot tell you the stock."
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}, breaker_failures=5), load_entry_points=False)
    toolkit = down_shop(h, FunctionTool(tools["submit"], permission=ALLOW))
    _, model, agent = harnessed(None, [calls(("search", {"q": "mug"}), ("inventory", {"sku": "a"})), text(MADE_UP),
                                       calls(("submit", {"answer": honest})), text("never")],
                                toolkit, harness=h, stream=True)
    events, final, report = await drive(h, agent)
    assert ran.of("submit") == [{"answer": honest}] and len(model.calls) == 3
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")
    assert final.get_text_content() == honest
    assert MADE_UP not in streamed(events)


class Stock(BaseModel):
    units: int
    summary: str


@pytest.mark.parametrize("stream", [True, False])
async def test_a_structured_output_made_beside_the_failing_call_never_streams_its_arguments(stream: bool) -> None:
    """README: once a dependency the run needed went down a made-up answer
    never streams; "a structured output made then is withheld: its call is
    shown without its arguments"; "what a streaming UI shows tells the same
    story". The model checks the inventory and, in the same batch, writes
    the structured output it could not know."""
    h = Harness(HarnessConfig(breaker_failures=5), load_entry_points=False)
    script = [calls(("inventory", {"sku": "a"}), ("GenerateStructuredOutput", {"units": 12, "summary": MADE_UP})),
              text("done")]
    _, _, agent = harnessed(None, script, down_shop(h), harness=h, stream=stream)
    events, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    assert final.structured_output is None and report.reason == "dependency_down"  # the answer withholds it
    assert final.get_text_content().startswith(FALLBACK.format(reason="a service it needs is unavailable"))
    assert "in stock" not in every_event(events)  # ... and so must the stream


async def test_a_structured_reply_whose_finishing_tool_completed_is_not_run_to_agentscopes_cap() -> None:
    """README: once the finishing tool succeeds "the reply ends with it";
    a structured reply that cannot get its output gets "up to two rounds
    narrowed to GenerateStructuredOutput ... without AgentScope's further
    rounds"; ``completed`` only when the delivery contract holds."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False)
    answer = "Three mugs match: red, blue and green."
    _, model, agent = harnessed(None, [calls(("search", {"q": "mug"})), calls(("submit", {"answer": answer})),
                                       text("here you go")],
                                [tools["search"], FunctionTool(tools["submit"], permission=ALLOW)], harness=h,
                                repeat=True)
    _, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    print(len(model.calls), repr(final.get_text_content()), report.terminal_state, report.reason)
    assert ran.of("submit") == [{"answer": answer}]
    assert len(model.calls) <= 4  # search, submit, at most two rounds narrowed to the output
    assert "maximum reasoning-acting iterations" not in (final.get_text_content() or "")
    assert report.terminal_state.value != "completed" or final.structured_output is not None


async def test_a_structured_reply_whose_finishing_tool_completed_gets_its_output_in_a_narrowed_round() -> None:
    """The other side: after the finishing tool, the next round is narrowed
    to GenerateStructuredOutput; a model that writes it there ends the reply
    completed, with the output and no further round."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False)
    answer = "Three mugs match: red, blue and green."
    _, model, agent = harnessed(None, [calls(("search", {"q": "mug"})), calls(("submit", {"answer": answer})),
                                       calls(("GenerateStructuredOutput", {"units": 3, "summary": answer}))],
                                [tools["search"], FunctionTool(tools["submit"], permission=ALLOW)], harness=h)
    _, final = await structured_reply(agent, Stock)
    report = h.last_report(agent)
    assert len(model.calls) == 3 and model.calls[2]["tool_choice"].mode == "GenerateStructuredOutput"
    assert final.structured_output == {"units": 3, "summary": answer}
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")


# ====================================================== 3. the model call's unarmed first step (b029c52, b87326d)


class WaitingModel(ScriptedModel):
    """Its second call waits: past the run's deadline (``own_timeout`` None),
    or until its own client timeout fires first."""

    own_timeout: float | None = None

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        if self.usage:
            if self.own_timeout is None:
                await asyncio.sleep(3)
            else:
                async with asyncio.timeout(self.own_timeout):  # the client's own, armed in its first step
                    await asyncio.sleep(3)
        return await super()._call_api(*args, **kwargs)


@pytest.mark.parametrize("own_timeout", [None, 0.05])
async def test_a_waiting_model_call_is_cut_at_the_deadline_and_a_clients_own_timeout_is_its_failure(
    own_timeout: float | None,
) -> None:
    """b029c52 arms the deadline only after the model call's first step.
    A call that waits past deadline_s=1.0 is still cut: ``deadline``, the
    fallback with what the run found (b87326d), no answer the model never
    gave. A client timeout armed in that first step is the provider's
    failure (``model_error``, ``model_error_text``), not the deadline."""
    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=1.0 if own_timeout is None else 30.0,
                              model_error_text="The provider failed; try again."), load_entry_points=False)
    model = WaitingModel([calls(("search", {"q": "mug"})), text("never said")], model="m")
    model.own_timeout = own_timeout
    agent = make_agent(model, [searcher(ran)], h.middlewares(), name="a")
    events, final, report = await drive(h, agent)
    answer = final.get_text_content()
    assert ran.of("search") == [{"q": "mug"}] and "never said" not in answer
    if own_timeout is None:
        assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
        assert answer.startswith(FALLBACK.format(reason="the time allowed for it ran out"))
        assert "What I found before stopping:\n- search: found mug" in answer
    else:
        assert (report.terminal_state.value, report.reason) == ("failed", "model_error")
        assert answer.startswith("The provider failed; try again.")
        assert not any(d.code == "deadline" or "deadline" in d.detail for d in report.decisions)


# ====================================================== 4. whole results remembered (fdf785c, 0577efe)


async def test_lookups_one_item_at_a_time_that_each_say_something_new_are_never_called_stalled() -> None:
    """Novelty now remembers a result whole by the words left once the
    call's echo is discounted: results that read alike but for their echoed
    order id, each with a new destination, must stay progress (12 rounds,
    stall_rounds=2: a false stall would constrain by round 5)."""
    cities = ["lisbon", "oslo", "quito", "hanoi", "lagos", "lima", "perth", "dakar", "riga", "sofia", "tunis", "cork"]
    ran = Ran()

    async def track(order_id: str) -> str:
        """Track an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("track", {"order_id": order_id}))
        return f"Order {order_id}: shipped to {cities[len(ran) - 1]}"

    h = Harness(HarnessConfig(stall_rounds=2), load_entry_points=False)
    model = ScriptedModel([*[calls(("track", {"order_id": f"A-{i}"})) for i in range(12)], text("all tracked")],
                          model="m")
    agent = make_agent(model, [track], h.middlewares(), name="tracker")
    _, final, report = await drive(h, agent)
    assert len(ran) == 12 and final.get_text_content() == "all tracked"
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert all(call.tool_choice is None for call in model.calls)

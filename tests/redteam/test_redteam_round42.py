"""Round 42: a helper attacked round 41's fixes. Each break, held here.

- a claimed number was compared in floating point (order 9007199254740992
  "was cancelled" when 9007199254740993 was) and never for an amount the tool
  takes as text ("$80.00" for ``amount="80"``);
- whether a sub-agent owes the finishing tool was fixed when its run opened
  (a toolkit changes in a run);
- a rule stopping the run short of its task in the round of the model's
  final answer left that answer standing (the stop's text is the answer);
- a blank ``secret_env`` value raised at the next run's open (held in round 41's
  test of a bad value).
"""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from hookkit import streamed
from scripted import ALICE, ScriptedModel, calls, delegating_tool, drain, make_agent, payload_bytes, run, text, tool
from test_redteam_round40 import RAN, submit_answer

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy, harness_hook


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def cancel_number(order_id: int) -> str:
    """Cancel an order. Args: order_id (int): The order number."""
    RAN.append(("cancel", str(order_id)))
    return "cancelled"


async def refund_text(order_id: str, amount: str) -> str:
    """Refund an order. Args: order_id (str): The order. amount (str): USD, as text."""
    RAN.append(("refund", amount))
    return "refunded"


AMOUNT = r"refunded \$(?P<amount>\d[\d,]*(?:\.\d+)?)"


@pytest.mark.parametrize(("fn", "claim", "args", "said", "stands"), [
    (cancel_number, r"order (?P<order_id>\d+) was cancelled", {"order_id": 9007199254740993},
     "Order 9007199254740992 was cancelled.", False),  # one past 2**53: no float rounding
    (cancel_number, r"order (?P<order_id>\d+) was cancelled", {"order_id": 9007199254740993},
     "Order 9007199254740993 was cancelled.", True),
    (refund_text, AMOUNT, {"order_id": "A-1", "amount": "80"},
     "I refunded $80.00.", True),  # a number the tool takes as text
    (refund_text, AMOUNT, {"order_id": "A-1", "amount": "80"},
     "I refunded $800.", False),
    (refund_text, r"refunded (?P<amount>\$?\d[\d,]*(?:\.\d+)?)", {"order_id": "A-1", "amount": "80"},
     "I refunded $80.00.", True),  # round 44: the currency sign inside the group
])
async def test_a_claimed_number_is_compared_exactly(
    fn: object, claim: str, args: dict[str, object], said: str, stands: bool,
) -> None:
    name = fn.__name__  # type: ignore[attr-defined]
    h = Harness(HarnessConfig(tools={name: ToolPolicy(role="mutation", claims=[claim])}), load_entry_points=False)
    model = ScriptedModel([calls((name, args)), text(said)])
    agent = make_agent(model, [fn], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent)
    assert len(RAN) == 1
    assert h.last_report(agent).reason == ("answered" if stands else "unsupported_claim")


# ------------------------------------------------ a toolkit changed in a run


async def search(q: str) -> str:
    """Search. Args: q (str): The query."""
    RAN.append(("search", q))
    return f"results for {q}"


@pytest.mark.parametrize("gains", [True, False])
async def test_a_sub_agent_owes_the_finishing_tool_while_its_toolkit_has_it(gains: bool) -> None:
    child_toolkit = Toolkit(tools=[tool(search)] if gains else [tool(search), tool(submit_answer)])

    async def change(q: str) -> str:
        """Change the tools. Args: q (str): Why."""
        if gains:
            await child_toolkit.add_tool(tool(submit_answer))
        else:
            await child_toolkit.remove_tool("submit_answer")
        return "changed"

    await child_toolkit.add_tool(tool(change))
    h = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}, max_enforce_retries=0),
                load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("change", {"q": "x"})), text("CHILD-FACT: x costs 5.")]),
                       child_toolkit, h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "price of x"})),
                                calls(("submit_answer", {"answer": "x costs 5"}))])
    lead = make_agent(lead_model, [delegating_tool(child), submit_answer], h.middlewares())
    await run(lead)
    child_report = next(r for r in h.reports if r.agent == "child")
    assert child_report.reason == ("finish_tool_not_called" if gains else "answered")
    assert ("CHILD-FACT: x costs 5." in payload_bytes(lead_model.calls[1])) is not gains


# ------------------------------------------- a stop in the answer's round


def stopping_the_answer(name: str, reason: str, state: TerminalState, text: str | None = None) -> Any:
    """A ``post_reflect`` hook that stops the run on the model's final answer."""

    @harness_hook("post_reflect", priority=30, name=name, kind="observer")
    def stop(ctx: Any) -> None:
        if ctx.model_output.is_final:
            ctx.stop(reason, state=state, text=text)

    return stop


answer_stopper = stopping_the_answer("answer_stopper", "policy_refused", TerminalState.INCOMPLETE, "STOPPED-BY-HOOK.")
answer_completer = stopping_the_answer("answer_completer", "good_enough", TerminalState.COMPLETED)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stop_short_of_the_task_in_the_answers_round_gives_its_text(stream: bool) -> None:
    h = Harness(HarnessConfig(), hooks=[answer_stopper], load_entry_points=False)
    model = ScriptedModel([text("MODEL answer.")], stream=stream)
    agent = make_agent(model, [search], h.middlewares())
    items = await drain(agent, UserMsg("user", "q"))
    report = h.last_report(agent)
    assert items[-1].get_text_content() == "STOPPED-BY-HOOK."
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "policy_refused")
    assert streamed(items[:-1]).endswith("STOPPED-BY-HOOK.")  # the stream ends with what the user receives


async def test_a_stop_that_completes_the_run_lets_the_answer_stand() -> None:
    h = Harness(HarnessConfig(), hooks=[answer_completer], load_entry_points=False)
    model = ScriptedModel([text("MODEL answer.")])
    agent = make_agent(model, [search], h.middlewares())
    _, final = await run(agent)
    assert final.get_text_content() == "MODEL answer."
    assert h.last_report(agent).terminal_state == TerminalState.COMPLETED


async def test_a_sub_agents_stop_in_its_answers_round_is_what_its_lead_reads() -> None:
    h = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}), hooks=[answer_stopper],
                load_entry_points=False)
    child = make_agent(ScriptedModel([text("CHILD-ANSWER.")]), [search], h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "price of x"})),
                                calls(("submit_answer", {"answer": "done"}))])
    lead = make_agent(lead_model, [delegating_tool(child), submit_answer], h.middlewares())
    await run(lead)
    read = payload_bytes(lead_model.calls[1])
    assert "STOPPED-BY-HOOK." in read and "CHILD-ANSWER." not in read

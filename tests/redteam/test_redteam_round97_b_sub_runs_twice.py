"""Red team, round 97 (b). A lead's tool runs a sub-agent that parks for a
human's confirmation, gets the human's answer and resumes it, all within the
one tool call. The lead's report lists the sub-agent once (the resumed run's
report supersedes its provisional one), but the result of the call that ran
it, ``metadata["harness"]["sub_runs"]``, lists the same run twice: its
superseded ``waiting_input`` report, then its ``completed`` one. README
("Nested runs share every enclosing budget"): the result of the tool call
that ran it carries "each nested run's ``run_id``, ``agent``,
``terminal_state`` and ``reason``": one entry a run, its ending; an
application reading it sees a sub-agent still waiting for a human that has
finished (and counts two sub-runs where one ran). Suspected cause:
``ReplyLifecycle.settle`` appends every settled report, the park's
provisional one included, to ``parent.ended_inside`` (no superseding as for
``children``)."""

from __future__ import annotations

from agentscope.event import ConfirmResult, RequireUserConfirmEvent, ToolResultEndEvent, UserConfirmResultEvent
from agentscope.message import Msg, UserMsg
from scripted import ALICE, RAN, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return "refunded"


async def test_a_sub_agent_parked_and_resumed_within_one_call_is_one_sub_run_of_it() -> None:
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(ask_when=lambda args: "Refund this order?")}),
                load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("o-1 refunded")]), [refund],
                       h.middlewares(), name="refunds")

    async def delegate(task: str) -> str:
        """Ask the refunds agent, with the human's approval when it asks.

        Args:
            task (str): What to do.
        """
        asks = [e async for e in child.reply_stream(UserMsg("lead", task)) if isinstance(e, RequireUserConfirmEvent)]
        answer = UserConfirmResultEvent(reply_id=asks[-1].reply_id, confirm_results=[
            ConfirmResult(confirmed=True, tool_call=c) for c in asks[-1].tool_calls])
        said = [m.get_text_content() or "" async for m in child.reply_stream(answer, yield_final_msg=True)
                if isinstance(m, Msg)]
        return " ".join(said)

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund o-1"})), text("Done.")]), [delegate],
                      h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        events, _ = await run(lead, "refund my order o-1")
    assert RAN == ["refund:o-1"]
    report = h.last_report(lead)
    assert [(c.agent, c.terminal_state.value) for c in report.children] == [("refunds", "completed")]
    ends = [e for e in events if isinstance(e, ToolResultEndEvent)]
    sub_runs = ends[0].metadata["harness"]["sub_runs"]
    assert [(s["run_id"], s["terminal_state"]) for s in sub_runs] == [(report.children[0].run_id, "completed")], sub_runs

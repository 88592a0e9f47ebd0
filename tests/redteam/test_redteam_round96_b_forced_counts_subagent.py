"""Red team, round 96 (b). The ladder's new top (``liveness_watchdog``: a run
constrained to conclude is stopped after ``stall_rounds`` more model calls)
counts the calls of the whole run tree (``run.root.model_calls``), not the
constrained run's own. A lead told to use its finishing tool calls it once;
the tool has a writer sub-agent draft the report (three model calls of the
sub-agent's); ``verify`` sends it back once for the totals. The lead has
made one model call since it was constrained, yet it is stopped
``incomplete`` with the fallback answer: its sub-agent's calls spent its
``stall_rounds``. README (liveness_watchdog): "A run constrained to conclude
that has not after ``stall_rounds`` more model calls ... is stopped"; a
finishing tool that fails its ``verify`` once and then delivers is a
conclusion, as it is without a sub-agent."""

from __future__ import annotations

from agentscope.message import UserMsg
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy


async def lookup(q: str) -> str:
    """Look a figure up.

    Args:
        q (str): The figure.
    """
    return f"{q}: 42"


async def test_a_sub_agents_calls_do_not_spend_the_constrained_leads_rounds() -> None:
    writer_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    drafting = [calls(("lookup", {"q": "revenue"})), calls(("lookup", {"q": "costs"})), text("Revenue 42, costs 42.")]
    writer = make_agent(ScriptedModel(drafting * 2), [lookup], writer_h.middlewares(), name="writer")

    async def submit_report(answer: str) -> str:
        """Deliver the report to the user (drafted by the writer).

        Args:
            answer (str): The report.
        """
        draft = await writer.reply(UserMsg("lead", answer))
        return f"{answer}\n{draft.get_text_content()}"

    verdicts = iter(["Add the totals.", None])
    h = Harness(HarnessConfig(tools={"submit_report": ToolPolicy(role="finish", verify=lambda r: next(verdicts))}),
                load_entry_points=False, environ={})
    model = ScriptedModel([
        text("Here is the report."),  # a text answer: constrained to the finishing tool
        calls(("submit_report", {"answer": "Q3 report"})),  # verify: the totals are missing
        calls(("submit_report", {"answer": "Q3 report, totals 84"})),  # its one retry: delivered
    ])
    lead = make_agent(model, [submit_report], h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        _, final = await run(lead, "write the Q3 report")
    report = h.last_report(lead)
    assert len(model.calls) == 3, f"the lead made {len(model.calls)} calls; reason {report.reason!r}"
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)
    assert "totals 84" in (final.get_text_content() or "")

"""Red team, round 88 (on rounds 85-87). A sub-agent (its own Harness, a $1 cap, AgentScope's ModelRouterMiddleware
placed first as the README says) called from a lead's tool: its classifier's
$10 call is attributed to the LEAD's run (``current_run()`` wins over
``consuming_run()``), so the sub-agent's own cap never sees it."""

from agentscope.middleware import ChatModelCandidate, ModelRouterMiddleware
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, delegating_tool, make_agent, run, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState

PRICES = {"clf": (10.0, 10.0), "big": (1.0, 1.0), "base": (1.0, 1.0), "lead": (1.0, 1.0)}


def _sub() -> tuple[Harness, object, ScriptedModel]:
    classifier = ScriptedModel([calls(("generate_structured_output", {"choice": "big"}), inp=1_000_000, out=0)],
                               model="clf")
    big = ScriptedModel([text("the big model's answer")], model="big")
    base = ScriptedModel([text("the base model's answer")], model="base")
    router = ModelRouterMiddleware(classifier, [ChatModelCandidate("big", big, "everything")])
    sub_h = Harness(HarnessConfig(deadline_s=30, cost=CostPolicy(cap_usd=1.0, prices=PRICES)),
                    load_entry_points=False, environ={})
    sub = make_agent(base, [], [router, *sub_h.middlewares()], name="researcher")
    return sub_h, sub, classifier


async def test_standalone_subagent_control() -> None:
    sub_h, sub, classifier = _sub()
    with sub_h.acting_for(ALICE):
        await run(sub, "hello")
    report = sub_h.last_report(sub)
    assert len(classifier.calls) == 1 and report.model_calls >= 1
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "budget")


async def test_subagent_classifier_is_the_subagents_call() -> None:
    sub_h, sub, classifier = _sub()
    lead_h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False, environ={})
    lead_model = ScriptedModel([calls(("delegate", {"task": "find it"})), text("Done.")], model="lead")
    lead = make_agent(lead_model, lead_h.instrument(Toolkit(tools=[tool(delegating_tool(sub))])),
                      lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        await run(lead, "go")
    sub_report, lead_report = sub_h.last_report(sub), lead_h.last_report(lead)
    assert len(classifier.calls) == 1
    assert lead_report.spent_usd >= 10.0  # a nested run's spend is its lead's too, charged once, as the sub-agent's
    # the classifier ran inside the sub-agent's reply: the sub-agent's call, under its $1 cap
    assert sub_report.spent_usd >= 10.0, sub_report.spent_usd
    assert (sub_report.terminal_state, sub_report.reason) == (TerminalState.INCOMPLETE, "budget"), (
        sub_report.terminal_state, sub_report.reason)

"""Round 157 c (held): A -> B -> A nesting (lead and sub-sub under Harness A with a candidate, the middle
sub-agent under Harness B). Identical candidate must differ nowhere; a stricter
`max_model_calls` candidate must differ at the sub-sub's call past it."""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text, tool

from agentscope_harness import Harness, HarnessConfig

pytestmark = pytest.mark.asyncio


def _delegating(child, name):
    async def delegate(task: str) -> str:
        """Ask.

        Args:
            task (str): What.
        """
        return (await child.reply(UserMsg("lead", task))).get_text_content() or ""
    delegate.__name__ = name
    return delegate


def _build(a: Harness, b: Harness):
    subsub = make_agent(ScriptedModel([calls(("search", {"q": "deep"})), calls(("search", {"q": "deeper"})),
                                       text("subsub done")]),
                        a.instrument(Toolkit(tools=[tool(search)])), a.middlewares(), name="subsub")
    sub = make_agent(ScriptedModel([calls(("inner", {"task": "t"})), text("sub done")]),
                     b.instrument(Toolkit(tools=[tool(_delegating(subsub, "inner"))])), b.middlewares(), name="sub")
    lead = make_agent(ScriptedModel([calls(("search", {"q": "a"})), calls(("outer", {"task": "t"})),
                                     text("lead done")]),
                      a.instrument(Toolkit(tools=[tool(search), tool(_delegating(sub, "outer"))])),
                      a.middlewares(), name="lead")
    return lead, sub, subsub


@pytest.mark.parametrize("cap,cand", [(None, None), (20, 20), (6, 6), (20, 6)])
async def test_aba(cap, cand) -> None:
    a = Harness(HarnessConfig(max_model_calls=cap), candidate=HarnessConfig(max_model_calls=cand),
                load_entry_points=False, environ={})
    b = Harness(HarnessConfig(), load_entry_points=False, environ={})
    lead, sub, subsub = _build(a, b)
    with a.acting_for(ALICE):
        await run(lead, "go")
    reports = [a.last_report(lead), b.last_report(sub), a.last_report(subsub)]
    info = [(r.agent, r.model_calls, r.terminal_state.value, r.reason, r.candidate_differences) for r in reports]
    print(info)
    diffs = reports[0].candidate_differences + reports[2].candidate_differences
    if cap == cand:
        assert diffs == [], info
    else:
        assert diffs, info

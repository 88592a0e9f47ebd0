"""Round 101 (c): DESIGN §3.2 gives the hook verbs at *every* point:
``ctx.constrain(reason)`` narrows ``tool_choice`` to the finishing tool or
``none``. At ``on_system_prompt`` the verb was recorded in the run's report
as an enforced ``constrain`` decision, yet no model call was narrowed (the
prompt hooks run once per Harness, on a scratch run whose ``force_conclude``
was dropped; a later run would not even run them). ``on_system_prompt``
hooks judge the config alone, for every run: a hint or a constraint there
is now refused loudly (the hook fails, recorded) instead of reported as
enforced and dropped (README, "Writing a hook")."""

from __future__ import annotations

from agentscope.tool import FunctionTool, Toolkit
from scripted import ALLOW, ScriptedModel, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q}"


@harness_hook("on_system_prompt", priority=70, name="conclude_rule", kind="observer")
def conclude_rule(ctx: HookContext) -> None:
    ctx.constrain("this deployment answers without tools")


async def test_constrain_at_on_system_prompt_is_refused_not_reported_as_enforced() -> None:
    h = Harness(HarnessConfig(), hooks=[conclude_rule], load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[FunctionTool(search, permission=ALLOW)]))
    model = ScriptedModel([text("done")])
    agent = make_agent(model, toolkit, h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    mine = [d for d in report.decisions if d.hook == "conclude_rule"]
    assert not [d for d in mine if d.action == "constrain"], mine  # no constraint said to be enforced...
    assert [d.action for d in mine] == ["error"] and "not available at on_system_prompt" in mine[0].detail
    assert model.calls[0].tool_choice is None  # ...and none made: the report and the call agree

"""Round 166 a: a shadow sub-agent's would-be refusal climbs its enforcing lead's ladder.

README "Shadow mode": "Shadow mode refuses nothing ... The user gets the model's answer";
"A Harness in shadow mode lends no caps: its limits are recorded on its own runs only,
never enforced on an enforcing sub-agent's" (round 108 b: a shadow sub-agent's
unenforced judgement must not end its enforcing lead).

Round 164 a moved ``facts.refused.append`` and ``met_by_enclosing_runs`` before the
``if self.shadow: return None`` in ``HookRunner._rejected``. A shadow-mode orders agent
(a policy on trial) looks up an order whose ``user_id`` is another's: in shadow the call
runs and answers, but ``met_by_enclosing_runs`` walks up into the ENFORCING lead (another
Harness). The lead meets "permission_denied" twice: its model is hinted "That was refused
again ... conclude now", its ``tool_choice`` narrowed, then stopped
``refused:permission_denied``; its user gets the fallback, not the answer.
"""

from __future__ import annotations

from typing import Any

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy

RAN: list[str] = []


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    RAN.append(order_id)
    return f"order {order_id}: shipped Tuesday"


async def _lead(mode_sub: str) -> tuple[Any, str, ScriptedModel, Any]:
    RAN.clear()
    lead_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    sub_h = Harness(HarnessConfig(mode=mode_sub, tools={
        "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})}),
        load_entry_points=False, environ={})
    # the orders agent passes the household's shared account id (u-7), every time
    sub_script = []
    for n in range(4):
        sub_script += [calls(("lookup_order", {"order_id": f"o{n}", "user_id": "u-7"})), text(f"o{n} shipped Tuesday")]
    sub = make_agent(ScriptedModel(sub_script), sub_h.instrument(Toolkit(tools=[tool(lookup_order)])),
                     sub_h.middlewares(), name="orders")

    async def ask_orders(task: str) -> str:
        """Ask the orders agent.

        Args:
            task (str): What to find out.
        """
        return (await sub.reply(UserMsg("lead", task))).get_text_content() or ""

    lead_model = ScriptedModel([calls(("ask_orders", {"task": f"where is o{n}?"})) for n in range(4)]
                               + [text("All four orders shipped Tuesday.")])
    lead = make_agent(lead_model, lead_h.instrument(Toolkit(tools=[tool(ask_orders)])), lead_h.middlewares(),
                      name="lead")
    with lead_h.acting_for(ALICE):
        _, final = await run(lead, "where are my orders?")
    return lead_h.last_report(lead), final.get_text_content() or "", lead_model, sub_h.last_report(sub)


async def test_a_shadow_sub_agents_would_be_refusals_leave_the_enforcing_lead_alone() -> None:
    report, final, model, sub_report = await _lead("shadow")
    assert all(d.enforced is False for d in sub_report.decisions if d.action == "refuse")
    hinted = [m for c in model.calls for m in c.formatted if "refused again" in str(m)]
    chosen = [c.tool_choice for c in model.calls]
    # the break (before round 164 a: all four ran, completed/answered): the enforcing lead is
    # told it was refused, narrowed, stopped refused:permission_denied; o2, o3 never looked up
    assert hinted == [], hinted[:1]
    assert RAN == ["o0", "o1", "o2", "o3"], RAN
    assert (report.terminal_state.value, report.reason) == ("completed", "answered"), (
        report.terminal_state.value, report.reason, chosen)
    assert final == "All four orders shipped Tuesday.", final

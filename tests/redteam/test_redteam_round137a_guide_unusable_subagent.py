"""Round 137 a: round 136 b's "one reading serves the gate and the guide"
(``sentinels.unusable_by``), a sub-agent's refusal.

README hook 11 (repeat_call_gate): "a sub-agent's, on a tool with ``identity_args``, counts
for its lead as it is refused (...): a call for another user is no step of any work, so an
attempt beside new work, every other round, every few rounds or through fresh sub-agents is
stopped". README Security: "A call refused for its arguments to a tool the caller cannot
use whatever its arguments (...; identity-bound with no principal bound, or one without the
attribute) answers ``permission_denied`` ... and counts as that refusal (``refusals``, the
ladder: ignored, it ends the run ``refused:permission_denied``)". CHANGELOG 136 b: "One
reading serves the gate and the guide".
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import UserMsg

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

RAN: list[Any] = []
MODELS: list[ScriptedModel] = []


async def account_op(order_id: str, account: str) -> str:
    """Act on a customer account.

    Args:
        order_id (str): The order.
        account (str): The account.
    """
    RAN.append(order_id)
    return "done"


def lead_of_fresh_researchers(h: Harness, scripts: list[list[Any]], rounds: int) -> Any:
    made: list[Any] = []
    MODELS.clear()

    async def delegate(task: str) -> str:
        """Ask a fresh researcher.

        Args:
            task (str): What to do.
        """
        MODELS.append(ScriptedModel(scripts[len(made)]))
        researcher = make_agent(MODELS[-1], [account_op], middlewares=h.middlewares(),
                                name=f"researcher{len(made)}")
        made.append(researcher)
        return (await researcher.reply(UserMsg("lead", task))).get_text_content() or ""

    script = [calls(("delegate", {"task": f"act on account {i}"})) for i in range(rounds)] + [text("Done.")] * 3
    return make_agent(ScriptedModel(script), [delegate], h.middlewares(), name="lead")


@pytest.mark.parametrize("arguments", ["well-formed (control)", "bad"])
async def test_a_sub_agents_unusable_identity_call_with_bad_arguments_counts_for_its_lead(arguments: str) -> None:
    """Attack: the principal has no ``account_id`` (the tool's ``identity_args``), so
    ``account_op`` can never run for it. A lead sends a fresh sub-agent each round; each
    sub-agent calls ``account_op`` once and gives up. Control: well-formed arguments
    (``authorization_gate`` refuses, ``met_by_enclosing_runs`` makes it the lead's too).
    Attack: arguments AgentScope's schema rejects (``order_id: 7``, no ``account``): the
    argument guide answers the same ``permission_denied`` (``unusable_by``) but appends it
    to the sub-agent's ``facts.refused`` only, never the enclosing runs'.

    Happened: control: the lead is stopped (``refused:permission_denied``, 4 model calls).
    Bad arguments: the lead's ladder never meets it: it delegates all 12 rounds and
    completes. Should: the same refusal counts for the lead alike (the guide should call
    ``run.met_by_enclosing_runs`` as the gate does for an identity-bound tool)."""
    RAN.clear()
    h = Harness(HarnessConfig(tools={"account_op": ToolPolicy(identity_args={"account": "account_id"})}),
                load_entry_points=False, environ={})
    bad = arguments == "bad"
    args = {"order_id": 7} if bad else {"order_id": "o-7", "account": "acc-victim"}
    rounds = 12
    scripts = [[calls(("account_op", args)), text(f"Could not act ({i}).")] for i in range(rounds)]
    lead = lead_of_fresh_researchers(h, scripts, rounds)
    with h.acting_for(Principal(user_id="u-42", tenant="acme")):  # no account_id attribute
        await run(lead, "act on all the accounts")
    report = h.last_report(lead)
    assert RAN == []
    assert "[harness:permission_denied]" in MODELS[0].calls[1].last_result  # what the researcher read
    first = report.children[0]
    assert first.refusals.get("permission_denied") == 1, first.refusals  # the researcher was refused
    assert report.reason == "refused:permission_denied", (report.terminal_state, report.reason, report.model_calls)
    assert report.model_calls <= 8, report.model_calls

"""Round 171 b (a budget team's scenarios, README "Ask a human" and "Budgets users can see"):
two dollar approvals made before the parked run continued were merged into one
``RunReport.extensions`` entry credited to the last approver."""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import UserMsg
from scripted import make_agent
from server import Reply
from side_kit import model

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, Principal, TerminalState
from agentscope_harness.approvals import BUDGETS_KEY

PRICE = {"gpt-test": ModelPrice(input_per_mtok=0.0, output_per_mtok=10_000.0)}  # 10 output tokens: $0.10
ALICE = Principal(user_id="alice", tenant="acme")
OPS = Principal(user_id="ops", tenant="acme")


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"found {q}"


async def reply(h: Harness, agent: Any, text: str) -> None:
    with h.acting_for(ALICE):
        async for _ in agent.reply_stream(UserMsg("user", text)):
            pass


async def parked(server: Any) -> tuple[Harness, Any]:
    server.plan(*[Reply(tool_calls=[("search", {"q": f"q{i}"})]) for i in range(8)], Reply(text="done"))
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.25, prices=PRICE, on_exhausted="ask")))
    agent = make_agent(model(server, "gpt-test"), [search], h.middlewares())
    await reply(h, agent, "research")
    assert h.last_report(agent).terminal_state == TerminalState.WAITING_INPUT
    return h, agent


async def test_each_approval_is_its_own_extension_with_its_approver(server):
    """README: "Approved extensions are in `RunReport.extensions`, each {"what": "usd",
    "by": 0.25, "approved_by": <the approver's user_id, or None>}"; extensions add up.
    An operator approves $0.10, then Alice $0.10, then Alice $0.05: three entries, the cap
    raised by their sum (was one entry of $0.25 credited to Alice)."""
    h, agent = await parked(server)
    with h.acting_for(OPS):
        h.extend(agent, usd=0.1)
    with h.acting_for(ALICE):
        h.extend(agent, usd=0.1)
        h.extend(agent, usd=0.05)
    await reply(h, agent, "continue")
    report = h.last_report(agent)
    assert [(e["what"], e["by"], e["approved_by"]) for e in report.extensions] == [
        ("usd", 0.1, "ops"), ("usd", 0.1, "alice"), ("usd", 0.05, "alice")]
    extends = [d.detail for d in report.decisions if d.action == "extend"]
    assert extends == ["usd +0.1 approved by ops", "usd +0.1 approved by alice", "usd +0.05 approved by alice"]
    assert "($0.5000)" in report.reason and report.model_calls == 2  # the cap: 0.25 + their sum


async def test_a_boolean_is_no_amount(server):
    """``extend(agent, usd=True)`` was an extension of $1 (config fields refuse booleans)."""
    h, agent = await parked(server)
    with h.acting_for(ALICE), pytest.raises(ValueError, match="not True"):
        h.extend(agent, usd=True)


async def test_a_budget_parked_by_0_1_reads_its_one_approver(server):
    """A state kept by 0.1 holds ``approved_by`` for the sum: read as one approval."""
    h, agent = await parked(server)
    with h.acting_for(ALICE):
        h.extend(agent, usd=0.1)
    kept = agent.state.middle_context[BUDGETS_KEY]
    for value in kept.values():
        value["approved_by"] = value.pop("approvals")[0]["approved_by"]
    await reply(h, agent, "continue")
    assert h.last_report(agent).extensions == [{"what": "usd", "by": 0.1, "approved_by": "alice"}]


class Float64(float):
    """What numpy's float64 is to Python: a float subclass (numpy is no dependency here)."""


async def test_an_amount_of_a_float_subclass_continues_the_budget(server):
    """Round 172 a: `extend(agent, usd=np.float64(0.1))` was kept as given, and the state's
    read-back (exact types) read the parked budget as none: the next reply started a fresh
    budget, the $0.20 spent forgotten."""
    h, agent = await parked(server)
    with h.acting_for(ALICE):
        h.extend(agent, usd=Float64(0.1))
    await reply(h, agent, "continue")
    report = h.last_report(agent)
    assert "continue_budget" in {d.action for d in report.decisions}
    assert report.extensions == [{"what": "usd", "by": 0.1, "approved_by": "alice"}]
    assert type(report.extensions[0]["by"]) is float


@pytest.mark.parametrize("amount", ["0.1", None, [0.1]])
async def test_an_amount_that_is_no_number_is_refused(server, amount: object):
    h, agent = await parked(server)
    with h.acting_for(ALICE), pytest.raises(ValueError, match="finite amount above 0"):
        h.extend(agent, usd=amount)  # type: ignore[arg-type]

"""A parked lead's budget resets by moving: what its background sub-agent
spent after the park is lost when the human's answer reaches another worker.

README, "Human in the loop": a reply parked in another process "goes on from
exactly where it was, as a resume in the parking process does: every field of
the run is carried ... call and token counts, spend"; "Nested runs share every
enclosing budget": a sub-agent "answers to its own caps and to those of every
run it is nested in (... cap_usd ...)"; "Spends no more than it may".
park_record.py: "a count left out starts again at zero on the other worker,
which is a cap that resets by moving".

Two workers on one SQLite file, `cap_usd=0.10`. Alice's lead starts a
researcher sub-agent in the background (a supported pattern: README "A
sub-agent still running when its lead settles ..."), then parks on a payout's
confirmation. The researcher then spends $0.08 of the lead's budget. Answered
on the parking worker, the lead's next call does not fit what is left and is
not made (control). Answered on the other worker, the resumed run starts from
the park record's $0.0026, makes a $0.04 call, and the task spends $0.1226
against its $0.10 cap; its report says $0.0426.
Cause: lifecycle._park_record_of / ReplyLifecycle._record_park write the record
once, at the park; a nested run still charging the parked run afterwards
(run_state charge walking `parent`) never updates it, and _restored/_held_to
on the other worker apply that snapshot.

Round 120 (red team on round 119): the record was written again only when the
sub-agent's model call was charged; its tool calls count against the lead's
``max_tool_calls`` too, and one made after its last model call (a finishing
tool ends its reply) was never recorded: answered on another worker, the
lead's next call ran past the cap ("call and token counts" are carried).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ToolPolicy
from agentscope_harness.stores import SQLiteStore
from tests.scripted import ALICE, ScriptedModel, calls, confirm, drain, make_agent, search, text, tool

pytestmark = pytest.mark.asyncio

PRICES = {"lead-m": (10.0, 30.0), "child-m": (10.0, 30.0)}  # 1000 in + 1000 out: $0.04
CAP = 0.10
MAX_TOOL_CALLS = 4
PAID: list[int] = []
LOOKED_UP: list[str] = []


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    PAID.append(amount)
    return f"paid {amount}"


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    LOOKED_UP.append(order_id)
    return f"order {order_id}: paid"


async def submit_report(report: str) -> str:
    """Submit the research report.

    Args:
        report (str): The report.
    """
    return report


class Gated(ScriptedModel):
    """The researcher's model: each request waits until ``go`` is set (the
    lead has parked by then)."""

    def __init__(self, *args: Any, go: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go = go

    async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
        await self.go.wait()
        return await super()._call_api(*args, **kwargs)


PAY_OUT = ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                     ask_when=lambda a: "over 50" if a["amount"] > 50 else None)
LIMITS = {  # what the lead is held to, what its researcher does in the background, and the lead's script
    "usd": (dict(cost=CostPolicy(cap_usd=CAP, prices=PRICES)),
            [calls(("search", {"q": "market"}), inp=1000, out=1000), text("research done", inp=1000, out=1000)],
            [calls(("spawn", {"task": "market"})), calls(("pay_out", {"user_id": "u-42", "amount": 80})),
             text("Paid 80; the research is under way.", inp=1000, out=1000)]),
    "tool_calls": (dict(max_tool_calls=MAX_TOOL_CALLS, require_finish_tool=False),
                   [calls(("search", {"q": "market"})), calls(("submit_report", {"report": "the market grows"}))],
                   [calls(("spawn", {"task": "market"})), calls(("pay_out", {"user_id": "u-42", "amount": 80})),
                    calls(("lookup", {"order_id": "A-1"})), text("Paid 80."), text("Paid 80.")]),
}


def worker(path: str, limit: str) -> Harness:
    return Harness(HarnessConfig(
        store=SQLiteStore(path), **LIMITS[limit][0],
        tools={"pay_out": PAY_OUT, "submit_report": ToolPolicy(role="finish")},
    ), load_entry_points=False, environ={})


def usd(model: ScriptedModel) -> float:
    return sum(u.input_tokens * 10e-6 + u.output_tokens * 30e-6 for u in model.usage)


async def scenario(tmp_path: Path, moved: bool, limit: str) -> tuple[Harness, Any, ScriptedModel, ScriptedModel]:
    """The lead starts its researcher in the background and parks on a
    payout's confirmation; the researcher then works on; the human answers
    on the parking worker or (``moved``) on another one."""
    PAID.clear(), LOOKED_UP.clear()
    path = str(tmp_path / "fleet.db")
    here = worker(path, limit)
    _, researcher, lead_script = LIMITS[limit]
    go = asyncio.Event()
    child_model = Gated(list(researcher), model="child-m", go=go)
    child = make_agent(child_model, here.instrument(Toolkit(tools=[tool(search), tool(submit_report)])),
                       here.middlewares(), name="researcher")
    background: list[asyncio.Task[Any]] = []

    async def spawn(task: str) -> str:
        """Start the researcher in the background.

        Args:
            task (str): What to research.
        """
        background.append(asyncio.create_task(drain(child, UserMsg("lead", task))))
        return "started"

    lead_model = ScriptedModel(list(lead_script), model="lead-m")

    def toolkit(h: Harness) -> Toolkit:
        return h.instrument(Toolkit(tools=[tool(spawn), tool(pay_out), tool(lookup)]))

    lead = make_agent(lead_model, toolkit(here), here.middlewares(), name="lead")
    with here.acting_for(ALICE):
        items = await drain(lead, UserMsg("user", "research the market, then pay me 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    go.set()
    await asyncio.gather(*background)  # the researcher spent on the parked lead's budget
    h = here
    if moved:
        h = worker(path, limit)
        lead = make_agent(lead_model, toolkit(h), h.middlewares(), name="lead",
                          state=AgentState.model_validate_json(lead.state.model_dump_json()))
    with h.acting_for(ALICE):
        await drain(lead, confirm(asked, asked.tool_calls[0]))
    return h, lead, lead_model, child_model


@pytest.mark.parametrize("moved", [False, True])  # control first
async def test_a_resume_elsewhere_carries_what_a_background_sub_agent_spent(tmp_path: Path, moved: bool) -> None:
    h, lead, lead_model, child_model = await scenario(tmp_path, moved, "usd")
    report = h.last_report(lead)
    assert PAID == [80]
    spent = usd(lead_model) + usd(child_model)
    assert report.spent_usd == pytest.approx(spent, abs=1e-6), (report.spent_usd, spent)
    assert spent <= CAP, f"moved={moved}: the task spent ${spent:.4f} against a ${CAP} cap"
    assert (report.terminal_state.value, report.reason) == ("incomplete", "budget")


@pytest.mark.parametrize("moved", [False, True])  # control first
async def test_a_resume_elsewhere_carries_a_background_sub_agents_tool_calls(tmp_path: Path, moved: bool) -> None:
    h, lead, _, _ = await scenario(tmp_path, moved, "tool_calls")
    report = h.last_report(lead)
    assert PAID == [80]
    assert LOOKED_UP == [], (
        f"moved={moved}: the lead's 5th tool call (spawn, 2 of its researcher's, pay_out, lookup) ran past "
        f"max_tool_calls={MAX_TOOL_CALLS}; report tool_calls={report.tool_calls}, "
        f"{report.terminal_state.value}/{report.reason}")

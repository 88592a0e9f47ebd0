"""Round 114 (shadow mode). Round 114 (shadow): shadow mode still enforces the "no answer beside a call
waiting for a human" rule (``finish_gate``), so a shadow Harness refuses calls
bare AgentScope makes.

README, HarnessConfig ``mode``: "``shadow``: decide and record, refuse nothing
(redaction, PII and the fence stay on; the deadline still ends the run)".
README, Security: "**Shadow mode** refuses nothing". DESIGN §6.5:
"``HARNESS_MODE=shadow`` runs every gate and records what it *would* do, but
refuses nothing".

The model writes a refund (AgentScope's own permission engine asks a human:
a FunctionTool without ``permission``) and the finishing tool ``submit`` in
one parallel batch. Bare AgentScope runs ``submit`` and asks the user about the
refund. Under ``HarnessConfig(mode="shadow")``:

* ``refund`` judged first: ``submit`` is refused (``not_ready``), never runs,
  and the model reads a ``[harness:not_ready]`` sentinel. The decision says
  ``enforced=False`` although it was enforced.
* ``submit`` admitted first (it takes a moment to deliver): the refund is
  denied (``run_concluded``, "the user is not asked about it"), so the user is
  never asked, and the model is called again.

Cause: ``calls.CallFlow._judge`` (``view.role == "finish" and
_written_before_a_decision``) and ``CallFlow.answer_under_way``'s finishing-tool
branch refuse without checking ``services.shadow`` (only the terminal branch
above it does), and ``tool_adapter._judged`` denies on them.

Real ``Agent``, real tools in a real ``Toolkit``."""

from __future__ import annotations

import asyncio

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

pytestmark = pytest.mark.asyncio

RAN: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append("refund")
    return f"refunded {order_id}"


async def submit(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    await asyncio.sleep(0.05)  # delivering takes a moment
    RAN.append("submit")
    return answer


BATCHES = {
    "refund_then_submit": [("refund", {"order_id": "A-1"}), ("submit", {"answer": "Refund of A-1 requested."})],
    "submit_then_refund": [("submit", {"answer": "Refund of A-1 requested."}), ("refund", {"order_id": "A-1"})],
}


async def _drive(mode: str | None, batch: list) -> tuple[list[str], int, int, object, list[str]]:
    """(tools run, questions put to the user, model calls, report, tool results the model holds)."""
    RAN.clear()
    model = ScriptedModel([calls(*batch), text("Your refund is waiting for approval.")])
    toolkit = Toolkit(tools=[FunctionTool(refund), tool(submit)])  # refund: AgentScope asks a human
    h = None
    if mode is None:
        agent = make_agent(model, toolkit)
        events = [e async for e in agent.reply_stream(UserMsg("user", "refund A-1"), yield_final_msg=True)]
    else:
        h = Harness(HarnessConfig(mode=mode, tools={"submit": ToolPolicy(role="finish")}),
                    load_entry_points=False, environ={})
        agent = make_agent(model, h.instrument(toolkit), h.middlewares())
        with h.acting_for(ALICE):
            events = [e async for e in agent.reply_stream(UserMsg("user", "refund A-1"), yield_final_msg=True)]
    asks = sum(1 for e in events if isinstance(e, RequireUserConfirmEvent))
    results = [str(b.output) for m in agent.state.context for b in (m.content if isinstance(m.content, list) else [])
               if getattr(b, "type", "") == "tool_result"]
    return sorted(RAN), asks, len(model.calls), (h.last_report(agent) if h else None), results


@pytest.mark.parametrize("order", list(BATCHES))
async def test_shadow_mode_refuses_no_call_of_a_batch_with_a_question(order: str) -> None:
    bare_ran, bare_asks, bare_calls, _, _ = await _drive(None, BATCHES[order])
    assert bare_ran == ["submit"] and bare_asks == 1 and bare_calls == 1  # bare AgentScope: submit runs, user asked

    ran, asks, model_calls, report, results = await _drive("shadow", BATCHES[order])
    unenforced = [(d.hook, d.code) for d in report.decisions if d.action == "refuse" and not d.enforced]
    # shadow mode: the same calls run, the same question is put to the user, no extra model call
    assert (ran, asks, model_calls) == (bare_ran, bare_asks, bare_calls), (
        f"shadow ran {ran}, asked {asks}, called the model {model_calls}x; "
        f"refusals recorded as not enforced: {unenforced}")
    assert not any("[harness:" in r for r in results), results  # nothing refused in what the model reads


@pytest.mark.parametrize("order", list(BATCHES))
async def test_control_enforce_mode_refuses_as_the_readme_says(order: str) -> None:
    """Regression guard: enforcing, the refusal is the README's rule (not a bug)."""
    _, _, _, report, results = await _drive("enforce", BATCHES[order])
    assert any(d.hook == "finish_gate" and d.enforced for d in report.decisions)
    assert any("[harness:" in r for r in results)

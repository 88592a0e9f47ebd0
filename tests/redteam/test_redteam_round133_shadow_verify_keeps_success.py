"""Round 133 (a): in shadow mode a finishing tool whose ``verify`` fails is
still turned into an ERROR result: the stream and the agent's stored context
say the tool failed, where bare AgentScope (and the tool itself) say it succeeded.

README, HarnessConfig ``mode``: "``shadow``: decide and record, refuse nothing".
README, Security: "**Shadow mode** refuses nothing ... its decisions marked
``enforced=False``". DESIGN §6.5: "``HARNESS_MODE=shadow`` runs every gate and
records what it *would* do, but refuses nothing". README hook table,
``mark_terminal``: "a failed verification becomes an error (``verification_failed``)"
(the enforcing behaviour).

Attack: the model calls the finishing tool ``submit``; it runs and succeeds, but
its ``verify`` says something is missing. Bare AgentScope streams a ``success``
tool result and keeps it as one. In shadow mode the harness records the
``verification_failed`` refusal as ``enforced=False`` (fine) but
``_verification_failed`` has already set ``result.state = "error"``: only the
notice is dropped in shadow (``HarnessToolAdapter._shaped``), so the
``ToolResultEndEvent`` the UI gets and the result the agent keeps (and a
provider formatter that sends the state, and the run's own facts) say ``error``.
A half-enforced refusal.

Real ``Agent``, real tool in a real instrumented ``Toolkit``, scripted model."""

from __future__ import annotations

import pytest
from agentscope.event import ToolResultEndEvent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

pytestmark = pytest.mark.asyncio


async def submit(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    return "delivered: " + answer


def _stored_states(agent) -> list[str]:
    return [str(getattr(b.state, "value", b.state)) for m in agent.state.context
            for b in (m.content if isinstance(m.content, list) else []) if getattr(b, "type", "") == "tool_result"]


async def _drive(mode: str | None):
    model = ScriptedModel([calls(("submit", {"answer": "Order A-1 total 30 USD"})), text("All done.")])
    toolkit = Toolkit(tools=[tool(submit)])
    h = None
    if mode is None:
        agent = make_agent(model, toolkit)
        items = [e async for e in agent.reply_stream(UserMsg("user", "total of A-1?"), yield_final_msg=True)]
    else:
        h = Harness(HarnessConfig(mode=mode, tools={"submit": ToolPolicy(
            role="finish", verify=lambda out: "the answer lacks the delivery date")}),
            load_entry_points=False, environ={})
        agent = make_agent(model, h.instrument(toolkit), h.middlewares())
        with h.acting_for(ALICE):
            items = [e async for e in agent.reply_stream(UserMsg("user", "total of A-1?"), yield_final_msg=True)]
    streamed = [str(getattr(e.state, "value", e.state)) for e in items if isinstance(e, ToolResultEndEvent)]
    return streamed, _stored_states(agent), items[-1].get_text_content(), len(model.calls), h, agent


async def test_shadow_verify_failure_does_not_turn_a_success_into_an_error() -> None:
    bare_streamed, bare_stored, bare_answer, bare_calls, _, _ = await _drive(None)
    assert bare_streamed == ["success"] and bare_stored == ["success"]

    streamed, stored, answer, model_calls, h, agent = await _drive("shadow")
    report = h.last_report(agent)
    assert any(d.code == "verification_failed" and not d.enforced for d in report.decisions)  # judged, recorded
    assert (answer, model_calls) == (bare_answer, bare_calls)
    # refuse nothing: the UI and the agent's context keep the tool's own success, as bare AgentScope does
    assert streamed == bare_streamed, f"shadow streamed the successful submit as {streamed}"
    assert stored == bare_stored, f"shadow stored the successful submit as {stored}"

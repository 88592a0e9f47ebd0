"""Red team, round 97 (a). Round 96 made the ladder's top count only a
finishing tool's failed deliveries (``facts.undelivered``, raised in
``mark_terminal`` for an error or a failed ``verify``) instead of the model
calls made since the run was constrained. A finishing call AgentScope
itself refuses (arguments that do not match the tool's schema: the harness
rewrites it to ``bad_arguments``) never reaches ``mark_terminal`` as the
finishing tool's result, so it is counted nowhere: a model constrained to
conclude that keeps calling its finishing tool with wrong arguments (a new
answer each time, so no ``repeated_failure``) runs to AgentScope's own
iteration cap, 51 model calls, and the user receives AgentScope's line "The
maximum reasoning-acting iterations are exceeded." while the report says
``stalled``. README (liveness_watchdog): the ladder's top stops a run
constrained to conclude that does not deliver; a stopped run's user gets
the fallback answer."""

from __future__ import annotations

from scripted import ALICE, ScriptedModel, calls, make_agent, run

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy

FALLBACK_START = "I could not complete this request"


async def submit_answer(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    return "delivered"


async def test_a_finishing_tool_called_with_wrong_arguments_is_stopped_by_the_ladder() -> None:
    h = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}),
                load_entry_points=False, environ={})
    # the model keeps naming the argument wrong: AgentScope refuses each call on its schema
    model = ScriptedModel(lambda turn: calls(("submit_answer", {"reply": f"attempt {len(model.calls)}"})))
    agent = make_agent(model, [submit_answer], h.middlewares())  # AgentScope's default iteration cap (50)
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert len(model.calls) <= 12, (
        f"{len(model.calls)} model calls, reason {report.reason!r}: the ladder never stopped it")
    assert (final.get_text_content() or "").startswith(FALLBACK_START), final.get_text_content()
